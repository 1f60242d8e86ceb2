package ipam_test

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/capi-monolith/capi-monolith/ipam/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/manager"
	"github.com/capi-monolith/capi-monolith/test/managertest"
)

const timeout = 60 * time.Second

var ctx = context.Background()

// startIPAM runs the binary's manager with only the ipam module and no
// webhooks, so the controller alone must keep every promise.
func startIPAM(t *testing.T, set ...func(*manager.Options)) (stop func()) {
	t.Helper()
	opts := managertest.Options("ipam")
	opts.Concurrency["ipam"] = 10
	for _, f := range set {
		f(&opts)
	}
	return managertest.Start(t, env.Config, opts, managertest.IPAM())
}

// inNamespace and withWatchFilter set the manager's --namespace and
// --watch-filter.
func inNamespace(ns string) func(*manager.Options) {
	return func(o *manager.Options) { o.WatchNamespace = ns }
}

func withWatchFilter(v string) func(*manager.Options) {
	return func(o *manager.Options) { o.WatchFilterValue = v }
}

func namespace(t *testing.T) string {
	t.Helper()
	ns, err := env.CreateNamespace(ctx, "ipam")
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return ns.Name
}

func spec(prefix int32, addresses ...string) v1alpha1.IPPoolSpec {
	return v1alpha1.IPPoolSpec{Addresses: addresses, Prefix: prefix}
}

func createPool(t *testing.T, ns, name string, s v1alpha1.IPPoolSpec) *v1alpha1.MonolithIPPool {
	t.Helper()
	p := &v1alpha1.MonolithIPPool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: s}
	NewWithT(t).Expect(env.Client.Create(ctx, p)).To(Succeed())
	return p
}

func createGlobalPool(t *testing.T, name string, s v1alpha1.IPPoolSpec) *v1alpha1.GlobalMonolithIPPool {
	t.Helper()
	p := &v1alpha1.GlobalMonolithIPPool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: s}
	g := NewWithT(t)
	g.Expect(env.Client.Create(ctx, p)).To(Succeed())
	t.Cleanup(func() {
		// Global pools outlive test namespaces: let them go.
		patch := client.MergeFrom(p.DeepCopy())
		p.Annotations = map[string]string{v1alpha1.SkipDeleteProtectionAnnotation: "true"}
		_ = env.Client.Patch(ctx, p, patch)
		_ = env.Client.Delete(ctx, p)
	})
	return p
}

type claimOpt func(*ipamv1.IPAddressClaim)

func inCluster(name string) claimOpt {
	return func(c *ipamv1.IPAddressClaim) { c.Spec.ClusterName = name }
}

func withAnnotation(k, v string) claimOpt {
	return func(c *ipamv1.IPAddressClaim) {
		if c.Annotations == nil {
			c.Annotations = map[string]string{}
		}
		c.Annotations[k] = v
	}
}

func fromGlobal() claimOpt {
	return func(c *ipamv1.IPAddressClaim) { c.Spec.PoolRef.Kind = v1alpha1.GlobalMonolithIPPoolKind }
}

func newClaim(ns, name, pool string, opts ...claimOpt) *ipamv1.IPAddressClaim {
	c := &ipamv1.IPAddressClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: ipamv1.IPAddressClaimSpec{PoolRef: ipamv1.IPPoolReference{
			APIGroup: v1alpha1.GroupVersion.Group, Kind: v1alpha1.MonolithIPPoolKind, Name: pool,
		}},
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

func createClaim(t *testing.T, ns, name, pool string, opts ...claimOpt) *ipamv1.IPAddressClaim {
	t.Helper()
	c := newClaim(ns, name, pool, opts...)
	NewWithT(t).Expect(env.Client.Create(ctx, c)).To(Succeed())
	return c
}

// readyReason returns the claim's Ready status and reason.
func readyReason(g Gomega, c *ipamv1.IPAddressClaim) (metav1.ConditionStatus, string) {
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(c), c)).To(Succeed())
	cond := conditions.Get(c, ipamv1.IPAddressClaimReadyCondition)
	if cond == nil {
		return "", ""
	}
	return cond.Status, cond.Reason
}

// addressOf waits for the claim to be fulfilled and returns its IPAddress.
func addressOf(t *testing.T, c *ipamv1.IPAddressClaim) *ipamv1.IPAddress {
	t.Helper()
	g := NewWithT(t)
	a := &ipamv1.IPAddress{}
	g.Eventually(func(g Gomega) {
		status, reason := readyReason(g, c)
		g.Expect(status).To(Equal(metav1.ConditionTrue), "reason %s", reason)
		g.Expect(c.Status.AddressRef.Name).To(Equal(c.Name))
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: c.Status.AddressRef.Name}, a)).To(Succeed())
	}, timeout).Should(Succeed())
	return a
}

func expectReason(t *testing.T, c *ipamv1.IPAddressClaim, reason string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) string {
		_, r := readyReason(g, c)
		return r
	}, timeout).Should(Equal(reason))
}

func expectGone(t *testing.T, obj client.Object) {
	t.Helper()
	NewWithT(t).Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj))
	}, timeout).Should(BeTrue(), "%T %s should be gone", obj, obj.GetName())
}

func poolCounts(g Gomega, p client.Object) *v1alpha1.IPAddressesStatus {
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(p), p)).To(Succeed())
	var counts *v1alpha1.IPAddressesStatus
	switch pool := p.(type) {
	case *v1alpha1.MonolithIPPool:
		counts = pool.Status.IPAddresses
	case *v1alpha1.GlobalMonolithIPPool:
		counts = pool.Status.IPAddresses
	}
	g.Expect(counts).NotTo(BeNil(), "the pool reports its counts")
	return counts
}

func createCluster(t *testing.T, ns, name string, paused bool) *clusterv1.Cluster {
	t.Helper()
	c := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: clusterv1.ClusterSpec{Paused: &paused}}
	NewWithT(t).Expect(env.Client.Create(ctx, c)).To(Succeed())
	return c
}

func addr(s string) netip.Addr { return netip.MustParseAddr(s) }

func claimName(i int) string { return fmt.Sprintf("claim-%03d", i) }
