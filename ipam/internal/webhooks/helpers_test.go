package webhooks_test

import (
	"context"
	"fmt"
	"github.com/capi-monolith/capi-monolith/test/envtest"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/capi-monolith/capi-monolith/ipam/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/ipam/internal/index"
)

// spec is a pool spec with a prefix and addresses; tests set the rest.
func spec(prefix int32, addresses ...string) v1alpha1.IPPoolSpec {
	return v1alpha1.IPPoolSpec{Prefix: prefix, Addresses: addresses}
}

func namespaced(ns, name string, s v1alpha1.IPPoolSpec) *v1alpha1.MonolithIPPool {
	return &v1alpha1.MonolithIPPool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: s}
}

func global(name string, s v1alpha1.IPPoolSpec) *v1alpha1.GlobalMonolithIPPool {
	return &v1alpha1.GlobalMonolithIPPool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: s}
}

// annotated sets one annotation on obj and returns it.
func annotated[T client.Object](obj T, key, value string) T {
	a := obj.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[key] = value
	obj.SetAnnotations(a)
	return obj
}

// createSeen creates obj and waits until the manager's cache, which the
// webhook reads, has it. The object is removed when the test ends.
func createSeen(t *testing.T, g Gomega, obj client.Object) {
	t.Helper()
	removeAtEnd(t, obj)
	g.Expect(env.Client.Create(t.Context(), obj)).To(Succeed(), "create %T %s", obj, client.ObjectKeyFromObject(obj))
	key := client.ObjectKeyFromObject(obj)
	seen := obj.DeepCopyObject().(client.Object)
	g.Eventually(func() error { return cached.Get(t.Context(), key, seen) }, timeout).Should(Succeed())
}

// allocate creates one IPAddress per address for pool, in namespace ns,
// and waits until the webhook's index finds all of the pool's addresses.
func allocate(t *testing.T, g Gomega, ns string, pool v1alpha1.Pool, addrs ...string) {
	t.Helper()
	kind := index.KeyOf(pool).Kind
	for i, a := range addrs {
		name := fmt.Sprintf("%s-%d", pool.GetName(), i)
		addr := &ipamv1.IPAddress{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: ipamv1.IPAddressSpec{
				ClaimRef: ipamv1.IPAddressClaimReference{Name: name},
				PoolRef:  ipamv1.IPPoolReference{APIGroup: v1alpha1.GroupVersion.Group, Kind: kind, Name: pool.GetName()},
				Address:  a,
				Prefix:   ptr.To(pool.GetSpec().Prefix),
			},
		}
		removeAtEnd(t, addr)
		g.Expect(env.Client.Create(t.Context(), addr)).To(Succeed())
	}
	g.Eventually(func(g Gomega) []ipamv1.IPAddress {
		list := &ipamv1.IPAddressList{}
		g.Expect(cached.List(t.Context(), list, client.MatchingFields{index.IPAddressPoolField: index.KeyOf(pool).String()})).To(Succeed())
		return list.Items
	}, timeout).Should(HaveLen(len(addrs)))
}

// record creates one allocation record per address for pool and waits
// until the webhook's index finds them all.
func record(t *testing.T, g Gomega, pool v1alpha1.Pool, addrs ...string) {
	t.Helper()
	key := index.KeyOf(pool)
	for i, a := range addrs {
		rec := &v1alpha1.MonolithIPAllocation{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("v4-%s", a)},
			Spec: v1alpha1.MonolithIPAllocationSpec{
				Address: a, Prefix: pool.GetSpec().Prefix,
				PoolRef:  v1alpha1.AllocationPoolReference{Kind: key.Kind, Namespace: key.Namespace, Name: key.Name},
				ClaimRef: v1alpha1.AllocationClaimReference{Namespace: pool.GetNamespace(), Name: fmt.Sprintf("%s-%d", pool.GetName(), i), UID: "uid"},
			},
		}
		removeAtEnd(t, rec)
		g.Expect(env.Client.Create(t.Context(), rec)).To(Succeed())
	}
	g.Eventually(func(g Gomega) []v1alpha1.MonolithIPAllocation {
		list := &v1alpha1.MonolithIPAllocationList{}
		g.Expect(cached.List(t.Context(), list, client.MatchingFields{index.AllocationPoolField: key.String()})).To(Succeed())
		return list.Items
	}, timeout).Should(HaveLen(len(addrs)))
}

// removeAtEnd deletes obj when the test ends, whatever the test did with
// it, and waits until the webhook's cache no longer has it: pools outlive
// their namespace's test otherwise (global ones always), and would overlap
// the pools of the next run with -count. Cleanups run last-in first-out, so
// a pool's IPAddresses go before it; the annotation covers a cache that has
// not seen them go yet.
func removeAtEnd(t *testing.T, obj client.Object) {
	t.Helper()
	key := client.ObjectKeyFromObject(obj)
	t.Cleanup(func() {
		g := NewWithT(t)
		// t.Context() is already cancelled when cleanups run.
		ctx := context.Background()
		current := obj.DeepCopyObject().(client.Object)
		if err := env.Client.Get(ctx, key, current); apierrors.IsNotFound(err) {
			return
		}
		if _, isPool := current.(v1alpha1.Pool); isPool {
			current.SetFinalizers(nil)
			annotated(current, v1alpha1.SkipDeleteProtectionAnnotation, "true")
			g.Expect(env.Client.Update(ctx, current)).To(Succeed())
		}
		g.Expect(client.IgnoreNotFound(env.Client.Delete(ctx, current))).To(Succeed())
		g.Eventually(func() bool {
			return apierrors.IsNotFound(cached.Get(ctx, key, current))
		}, timeout).Should(BeTrue(), "the cache forgets %s", key)
	})
}

// warningClient is an uncached client whose warnings the test can read.
func warningClient(t *testing.T, g Gomega) (client.Client, *envtest.Warnings) {
	t.Helper()
	c, w, err := env.WarningClient()
	g.Expect(err).NotTo(HaveOccurred())
	return c, w
}

// haveAll matches an error whose message has every substring.
func haveAll(substrings ...string) OmegaMatcher {
	ms := make([]OmegaMatcher, 0, len(substrings))
	for _, s := range substrings {
		ms = append(ms, MatchError(ContainSubstring(s)))
	}
	return And(ms...)
}
