package webhooks_test

import (
	"fmt"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/capi-monolith/capi-monolith/ipam/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/test/managertest"
)

// Two overlapping pools sent in one batch may both pass the webhook (each
// call reads a cache that has not seen the other); whatever it admitted,
// the ipam module (here beside the webhook, as the binary runs it) never
// hands out one address twice.
func TestOverlappingPoolsSentTogetherNeverShareAnAddressWithWebhooksOn(t *testing.T) {
	g := NewWithT(t)
	managertest.Start(t, env.Config, managertest.Options(), managertest.IPAM())
	ns := env.Namespace(t, "batch")
	pools := []client.Object{
		namespaced(ns, "one", spec(24, "10.210.0.10-10.210.0.20")),
		namespaced(ns, "two", spec(24, "10.210.0.15-10.210.0.25")),
	}
	admitted := make([]bool, len(pools))
	var wg sync.WaitGroup
	for i, p := range pools {
		removeAtEnd(t, p)
		wg.Go(func() { admitted[i] = env.Client.Create(t.Context(), p) == nil })
	}
	wg.Wait()
	var claims []*ipamv1.IPAddressClaim
	for i, p := range pools {
		if !admitted[i] {
			continue
		}
		for j := range 5 {
			c := &ipamv1.IPAddressClaim{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s-%d", p.GetName(), j)},
				Spec: ipamv1.IPAddressClaimSpec{PoolRef: ipamv1.IPPoolReference{
					APIGroup: v1alpha1.GroupVersion.Group, Kind: v1alpha1.MonolithIPPoolKind, Name: p.GetName(),
				}},
			}
			g.Expect(env.Client.Create(t.Context(), c)).To(Succeed())
			claims = append(claims, c)
		}
	}
	g.Expect(claims).NotTo(BeEmpty())
	seen := map[string]string{}
	for _, c := range claims {
		a := &ipamv1.IPAddress{}
		g.Eventually(func(g Gomega) {
			g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(c), c)).To(Succeed())
			g.Expect(conditions.IsTrue(c, ipamv1.IPAddressClaimReadyCondition)).To(BeTrue())
			g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(c), a)).To(Succeed())
		}, 3*timeout).Should(Succeed())
		g.Expect(seen).NotTo(HaveKey(a.Spec.Address), "address handed out twice")
		seen[a.Spec.Address] = c.Name
	}
}

func TestPrefixZeroAndPoolsWithNothingToHandOutAreRejectedWithFieldErrors(t *testing.T) {
	g := NewWithT(t)
	ns := env.Namespace(t, "empty")
	err := env.Client.Create(t.Context(), namespaced(ns, "zero", spec(0, "10.211.0.1")))
	g.Expect(err).To(MatchError(ContainSubstring("spec.prefix")))
	err = env.Client.Create(t.Context(), namespaced(ns, "network-only", spec(24, "10.211.0.0")))
	g.Expect(err).To(MatchError(And(ContainSubstring("spec.addresses"), ContainSubstring("no address is left to hand out"))))
	s := spec(30, "10.211.1.0/30")
	s.ExcludedAddresses = []string{"10.211.1.1-10.211.1.2"}
	err = env.Client.Create(t.Context(), namespaced(ns, "all-excluded", s))
	g.Expect(err).To(MatchError(ContainSubstring("no address is left to hand out")))
}
