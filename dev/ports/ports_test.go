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

// The kernel offers a port again once its listener closes; Free must not,
// or two of dev's children would be given one port between Free and their
// bind. Hundreds of picks make a repeat from the kernel near certain.
func TestFreeNeverReturnsAPortTwice(t *testing.T) {
	g := NewWithT(t)
	seen := map[int]bool{}
	for range 500 {
		p, err := ports.One()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(seen).NotTo(HaveKey(p))
		seen[p] = true
	}
}

func TestReserveRejectsAddressesWithoutAPort(t *testing.T) {
	g := NewWithT(t)
	g.Expect(ports.Reserve("", "0", ":0", "127.0.0.1:0", ":9440")).To(Succeed())
	g.Expect(ports.Reserve("127.0.0.1")).To(MatchError(ContainSubstring(`invalid listen address "127.0.0.1"`)))
	g.Expect(ports.Reserve("127.0.0.1:http")).To(MatchError(ContainSubstring("invalid port")))
}
