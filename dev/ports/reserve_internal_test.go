package ports

import (
	"net"
	"testing"

	. "github.com/onsi/gomega"
)

func TestAReservedPortIsNeverOffered(t *testing.T) {
	g := NewWithT(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	addr := l.Addr().String()
	port := l.Addr().(*net.TCPAddr).Port
	g.Expect(l.Close()).To(Succeed())

	g.Expect(Reserve(addr)).To(Succeed())
	g.Expect(taken).To(HaveKey(port))
	got, err := Free(100)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).NotTo(ContainElement(port))
}
