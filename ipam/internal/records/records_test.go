package records

import (
	"net/netip"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/capi-monolith/capi-monolith/ipam/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/ipam/internal/index"
)

func TestRecordNamesAreValidAndCollideExactlyWhenTheyMust(t *testing.T) {
	g := NewWithT(t)
	a := index.PoolKey{Kind: v1alpha1.MonolithIPPoolKind, Namespace: "ns", Name: "a"}
	b := index.PoolKey{Kind: v1alpha1.GlobalMonolithIPPoolKind, Name: strings.Repeat("b", 253)}
	for _, s := range []string{"10.0.0.1", "0.0.0.0", "::", "fd00::", "::1", "2001:db8::ff00:42:8329", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"} {
		addr := netip.MustParseAddr(s)
		for _, key := range []index.PoolKey{a, b} {
			for _, overlap := range []bool{false, true} {
				name := Name(key, addr, overlap)
				g.Expect(validation.IsDNS1123Subdomain(name)).To(BeEmpty(), "%s is a valid object name", name)
			}
		}
		g.Expect(Name(a, addr, false)).To(Equal(Name(b, addr, false)), "pools that do not allow overlapping share one name per address")
		g.Expect(Name(a, addr, true)).NotTo(Equal(Name(b, addr, true)), "pools that allow overlapping have their own")
		g.Expect(Name(a, addr, true)).NotTo(Equal(Name(a, addr, false)))
	}
	g.Expect(Name(a, netip.MustParseAddr("10.0.0.1"), false)).To(Equal("v4-10.0.0.1"))
	g.Expect(Name(a, netip.MustParseAddr("10.0.0.1"), false)).NotTo(Equal(Name(a, netip.MustParseAddr("10.0.0.10"), false)))
}
