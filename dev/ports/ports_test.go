package ports_test

import (
	"net"
	"strconv"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/capi-monolith/capi-monolith/dev/ports"
)

func TestFreePortsAreDistinctAndBindable(t *testing.T) {
	g := NewWithT(t)
	got, err := ports.Free(5)
	g.Expect(err).NotTo(HaveOccurred())
	seen := map[int]bool{}
	for _, p := range got {
		g.Expect(seen).NotTo(HaveKey(p))
		seen[p] = true
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		g.Expect(err).NotTo(HaveOccurred())
		l.Close()
	}
}
