package hosting_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strconv"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/hosting"
)

// freeRange finds n consecutive ports nothing listens on now.
func freeRange(g Gomega, n int) hosting.PortRange {
	for first := 41000; first < 60000; first += n {
		ok := true
		for p := first; p < first+n; p++ {
			l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
			if err != nil {
				ok = false
				break
			}
			_ = l.Close()
		}
		if ok {
			return hosting.PortRange{First: first, Last: first + n - 1}
		}
	}
	g.Expect("a free range").To(BeEmpty())
	return hosting.PortRange{}
}

func newHosting(g Gomega, ports hosting.PortRange, recorded ...clusterv1.APIEndpoint) *hosting.Hosting {
	h, err := hosting.New(hosting.Options{
		Address: netip.MustParseAddr("127.0.0.1"),
		Ports:   ports,
		// No CA Secret exists: the port handling is what is tested here
		// (infra/workload_test.go serves real clusters).
		Secrets:   fake.NewClientBuilder().Build(),
		Endpoints: func(context.Context) ([]clusterv1.APIEndpoint, error) { return recorded, nil },
	})
	g.Expect(err).NotTo(HaveOccurred())
	return h
}

func key(name string) types.NamespacedName { return types.NamespacedName{Namespace: "ns", Name: name} }

// Each cluster gets a port of its own; ports recorded by clusters not yet
// served again, and ports another process holds, are skipped; a full range
// is an error; a removed cluster's port is free again.
func TestPortsAreHandedOutOncePerCluster(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	r := freeRange(g, 4)
	recorded := clusterv1.APIEndpoint{Host: "127.0.0.1", Port: int32(r.First + 1)}
	h := newHosting(g, r, recorded)
	defer h.Remove(key("a"))

	held, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(r.First+2))
	g.Expect(err).NotTo(HaveOccurred())
	defer held.Close()

	a, err := h.Serve(ctx, key("a"), clusterv1.APIEndpoint{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(a).To(Equal(clusterv1.APIEndpoint{Host: "127.0.0.1", Port: int32(r.First)}))
	again, err := h.Serve(ctx, key("a"), a)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again).To(Equal(a), "a served cluster keeps its endpoint")

	b, err := h.Serve(ctx, key("b"), clusterv1.APIEndpoint{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(b.Port).To(Equal(int32(r.Last)), "the recorded port and the one another process holds are skipped")

	_, err = h.Serve(ctx, key("c"), clusterv1.APIEndpoint{})
	g.Expect(err).To(MatchError(ContainSubstring("no free port left")))

	// The cluster that recorded a port gets it back.
	rec, err := h.Serve(ctx, key("recorded"), recorded)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rec).To(Equal(recorded))
	g.Expect(h.Len()).To(Equal(3))

	h.Remove(key("b"))
	_, err = net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(r.Last), 0)
	g.Expect(err).To(HaveOccurred(), "a removed cluster's listener is closed")
	c, err := h.Serve(ctx, key("c"), clusterv1.APIEndpoint{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.Port).To(Equal(int32(r.Last)))
	h.Remove(key("c"))
	h.Remove(key("recorded"))
	h.Remove(key("never-served"))
	g.Expect(h.Len()).To(Equal(1))
}

// An endpoint off the address or the range is not served, and says so.
func TestEndpointsElsewhereAreNotHosted(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	r := freeRange(g, 2)
	h := newHosting(g, r)
	for _, e := range []clusterv1.APIEndpoint{
		{Host: "10.128.0.1", Port: 6443},
		{Host: "127.0.0.1", Port: int32(r.Last + 1)},
	} {
		_, err := h.Serve(ctx, key("x"), e)
		g.Expect(errors.Is(err, hosting.ErrNotHosted)).To(BeTrue(), "%v: %v", e, err)
		g.Expect(h.Hosts(e)).To(BeFalse())
	}
	g.Expect(h.Len()).To(BeZero())
}

func TestAddressMustBeDialable(t *testing.T) {
	g := NewWithT(t)
	_, err := hosting.New(hosting.Options{Address: netip.MustParseAddr("0.0.0.0"), Secrets: fake.NewClientBuilder().Build()})
	g.Expect(err).To(MatchError(ContainSubstring("clients can dial")))
}
