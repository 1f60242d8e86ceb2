package ipam_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/capi-monolith/capi-monolith/ipam/api/v1alpha1"
)

// createClaims creates n claims named prefix-NNN in ns, four at a time.
func createClaims(t *testing.T, ns, prefix, pool string, n int, opts ...claimOpt) []*ipamv1.IPAddressClaim {
	t.Helper()
	claims := make([]*ipamv1.IPAddressClaim, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	errs := make(chan error, n)
	for i := range claims {
		claims[i] = newClaim(ns, fmt.Sprintf("%s-%03d", prefix, i), pool, opts...)
		wg.Add(1)
		sem <- struct{}{}
		go func(c *ipamv1.IPAddressClaim) {
			defer wg.Done()
			defer func() { <-sem }()
			if err := env.Client.Create(ctx, c); err != nil {
				errs <- err
			}
		}(claims[i])
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
	}
	return claims
}

// expectDistinct waits for every claim to be fulfilled and fails on an
// address handed out twice.
func expectDistinct(t *testing.T, claims []*ipamv1.IPAddressClaim) map[string]string {
	t.Helper()
	g := NewWithT(t)
	seen := map[string]string{}
	for _, c := range claims {
		a := addressOf(t, c)
		key := c.Namespace + "/" + c.Name
		g.Expect(seen).NotTo(HaveKey(a.Spec.Address), "address %s handed out to %s and %s", a.Spec.Address, seen[a.Spec.Address], key)
		seen[a.Spec.Address] = key
	}
	return seen
}

// liveRecords lists the allocation records of a pool that hold an address.
func liveRecords(g Gomega, kind, ns, name string) []v1alpha1.MonolithIPAllocation {
	list := &v1alpha1.MonolithIPAllocationList{}
	g.Expect(env.Client.List(ctx, list)).To(Succeed())
	var out []v1alpha1.MonolithIPAllocation
	for _, r := range list.Items {
		if r.Spec.PoolRef.Kind == kind && r.Spec.PoolRef.Namespace == ns && r.Spec.PoolRef.Name == name && !r.IsReleased() {
			out = append(out, r)
		}
	}
	return out
}

func TestManagersShardedByNamespaceNeverShareAnAddressOfAGlobalPool(t *testing.T) {
	g := NewWithT(t)
	a, b := namespace(t), namespace(t)
	startIPAM(t, inNamespace(a))
	startIPAM(t, inNamespace(b))
	pool := createGlobalPool(t, "sharded", spec(23, "10.130.0.0/23"))
	claims := append(createClaims(t, a, "a", "sharded", 150, fromGlobal()), createClaims(t, b, "b", "sharded", 150, fromGlobal())...)
	expectDistinct(t, claims)
	g.Eventually(func(g Gomega) {
		g.Expect(liveRecords(g, v1alpha1.GlobalMonolithIPPoolKind, "", "sharded")).To(HaveLen(300), "one record per address, no leftovers")
		g.Expect(poolCounts(g, pool).Used).To(BeEquivalentTo(300), "each shard counts the other's addresses too")
	}, timeout).Should(Succeed())
}

func TestManagersShardedByWatchFilterNeverShareAnAddressOfAGlobalPool(t *testing.T) {
	g := NewWithT(t)
	startIPAM(t, withWatchFilter("shard-x"))
	startIPAM(t, withWatchFilter("shard-y"))
	ns := namespace(t)
	createGlobalPool(t, "filtered", spec(24, "10.137.0.0/24"))
	label := func(v string) claimOpt {
		return func(c *ipamv1.IPAddressClaim) { c.Labels = map[string]string{clusterv1.WatchLabel: v} }
	}
	claims := append(createClaims(t, ns, "x", "filtered", 60, fromGlobal(), label("shard-x")),
		createClaims(t, ns, "y", "filtered", 60, fromGlobal(), label("shard-y"))...)
	expectDistinct(t, claims)
	g.Eventually(func(g Gomega) {
		g.Expect(liveRecords(g, v1alpha1.GlobalMonolithIPPoolKind, "", "filtered")).To(HaveLen(120))
	}, timeout).Should(Succeed())
}

func TestTwoUnshardedManagersAtOnceNeverShareAnAddress(t *testing.T) {
	g := NewWithT(t)
	startIPAM(t)
	startIPAM(t)
	ns := namespace(t)
	createPool(t, ns, "split", spec(23, "10.131.0.0/23"))
	claims := createClaims(t, ns, "c", "split", 250)
	expectDistinct(t, claims)
	g.Eventually(func(g Gomega) {
		g.Expect(liveRecords(g, v1alpha1.MonolithIPPoolKind, ns, "split")).To(HaveLen(250), "the loser of a race drops its record")
	}, timeout).Should(Succeed())
}

func TestOverlappingPoolsCreatedTogetherWithWebhooksOffNeverShareAnAddress(t *testing.T) {
	startIPAM(t)
	ns := namespace(t)
	// Both pools in one batch: no webhook runs, none would have seen the
	// other in its cache anyway.
	p1 := &v1alpha1.MonolithIPPool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "one"}, Spec: spec(24, "10.132.0.10-10.132.0.20")}
	p2 := &v1alpha1.GlobalMonolithIPPool{ObjectMeta: metav1.ObjectMeta{Name: "overlap-two"}, Spec: spec(24, "10.132.0.15-10.132.0.25")}
	var wg sync.WaitGroup
	for _, p := range []client.Object{p1, p2} {
		wg.Go(func() { NewWithT(t).Expect(env.Client.Create(ctx, p)).To(Succeed()) })
	}
	wg.Wait()
	t.Cleanup(func() {
		patch := client.MergeFrom(p2.DeepCopy())
		p2.Annotations = map[string]string{v1alpha1.SkipDeleteProtectionAnnotation: "true"}
		_ = env.Client.Patch(ctx, p2, patch)
		_ = env.Client.Delete(ctx, p2)
	})
	// Five each always fit: each pool keeps at least six addresses the
	// other cannot take.
	claims := append(createClaims(t, ns, "one", "one", 5), createClaims(t, ns, "two", "overlap-two", 5, fromGlobal())...)
	expectDistinct(t, claims)
}

func TestReleaseWaitsForTheClaimsOtherFinalizers(t *testing.T) {
	g := NewWithT(t)
	startIPAM(t)
	ns := namespace(t)
	createPool(t, ns, "one", spec(24, "10.133.0.10"))
	const nodeFinalizer = "infrastructure.example.com/node-gone"
	held := createClaim(t, ns, "held", "one", func(c *ipamv1.IPAddressClaim) { c.Finalizers = []string{nodeFinalizer} })
	address := addressOf(t, held)
	g.Expect(env.Client.Delete(ctx, held)).To(Succeed())
	waiting := createClaim(t, ns, "waiting", "one")
	expectReason(t, waiting, ipamv1.IPAddressClaimReadyPoolExhaustedReason)
	g.Consistently(func(g Gomega) {
		status, reason := readyReason(g, waiting)
		g.Expect(status).To(Equal(metav1.ConditionFalse), "reason %s", reason)
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(address), &ipamv1.IPAddress{})).To(Succeed(), "the node still has its address")
	}, 3*time.Second, 200*time.Millisecond).Should(Succeed())

	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(held), held)).To(Succeed())
	patch := client.MergeFrom(held.DeepCopy())
	controllerutil.RemoveFinalizer(held, nodeFinalizer)
	g.Expect(env.Client.Patch(ctx, held, patch)).To(Succeed())
	g.Expect(addressOf(t, waiting).Spec.Address).To(Equal("10.133.0.10"), "handed on once the other finalizer is gone")
}

func TestGracePeriodSurvivesAManagerRestart(t *testing.T) {
	g := NewWithT(t)
	stop := startIPAM(t)
	ns := namespace(t)
	s := spec(24, "10.134.0.10")
	s.AddressReuseGracePeriodSeconds = 3600
	createPool(t, ns, "cool", s)
	held := addressOf(t, createClaim(t, ns, "first", "cool"))
	g.Expect(env.Client.Delete(ctx, newClaim(ns, "first", "cool"))).To(Succeed())
	expectGone(t, held)
	expectGone(t, newClaim(ns, "first", "cool"))
	stop()

	startIPAM(t)
	next := createClaim(t, ns, "second", "cool")
	expectReason(t, next, ipamv1.IPAddressClaimReadyPoolExhaustedReason)
	g.Consistently(func(g Gomega) metav1.ConditionStatus {
		status, _ := readyReason(g, next)
		return status
	}, 3*time.Second, 200*time.Millisecond).Should(Equal(metav1.ConditionFalse), "the address cools down for an hour, restart or not")
	rec := &v1alpha1.MonolithIPAllocation{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: "v4-10.134.0.10"}, rec)).To(Succeed())
	g.Expect(rec.Status.ReusableAfter).NotTo(BeNil())
	g.Expect(rec.Status.ReusableAfter.Time).To(BeTemporally(">", time.Now().Add(50*time.Minute)))
}

func TestRecreatedIPAddressKeepsItsPrefixAndGatewayAfterThePoolChanged(t *testing.T) {
	g := NewWithT(t)
	stop := startIPAM(t)
	ns := namespace(t)
	pool := createPool(t, ns, "pool", v1alpha1.IPPoolSpec{Addresses: []string{"10.135.0.10-10.135.0.20"}, Prefix: 24, Gateway: "10.135.0.1"})
	c := createClaim(t, ns, "claim", "pool")
	before := addressOf(t, c)
	stop()
	// The change and the deletion happen while no manager runs: only what
	// is stored can bring the original values back.
	patch := client.MergeFrom(pool.DeepCopy())
	pool.Spec.Gateway, pool.Spec.Prefix = "10.135.0.126", 25
	g.Expect(env.Client.Patch(ctx, pool, patch)).To(Succeed())
	g.Expect(env.Client.Delete(ctx, before)).To(Succeed())
	startIPAM(t)
	g.Eventually(func(g Gomega) {
		after := &ipamv1.IPAddress{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(before), after)).To(Succeed())
		g.Expect(after.UID).NotTo(Equal(before.UID), "a new object")
		g.Expect(after.Spec.Address).To(Equal(before.Spec.Address))
		g.Expect(after.Spec.Gateway).To(Equal("10.135.0.1"))
		g.Expect(after.Spec.Prefix).To(Equal(ptr.To[int32](24)))
	}, timeout).Should(Succeed())
	fresh := addressOf(t, createClaim(t, ns, "fresh", "pool"))
	g.Expect(fresh.Spec.Gateway).To(Equal("10.135.0.126"), "new addresses follow the pool's current spec")
	g.Expect(fresh.Spec.Prefix).To(Equal(ptr.To[int32](25)))
}

func TestClaimsOfAnInvalidPoolGetAConditionAndAnEvent(t *testing.T) {
	g := NewWithT(t)
	startIPAM(t)
	ns := namespace(t)
	// Only the network address: nothing to hand out. The webhook would
	// refuse it; with webhooks off the controller must say so itself.
	bad := createPool(t, ns, "bad", v1alpha1.IPPoolSpec{Addresses: []string{"10.136.1.0"}, Prefix: 24})
	c := createClaim(t, ns, "claim", bad.Name)
	expectReason(t, c, ipamv1.IPAddressClaimReadyPoolNotReadyReason)
	g.Expect(readyMessage(g, c)).To(ContainSubstring("no address is left to hand out"))
	g.Eventually(func(g Gomega) []string {
		return warningReasonsFor(g, c)
	}, timeout).Should(ContainElement(ipamv1.IPAddressClaimReadyPoolNotReadyReason))
}

func readyMessage(g Gomega, c *ipamv1.IPAddressClaim) string {
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(c), c)).To(Succeed())
	cond := conditions.Get(c, ipamv1.IPAddressClaimReadyCondition)
	if cond == nil {
		return ""
	}
	return cond.Message
}

// warningReasonsFor lists the reasons of the Warning Events about o.
func warningReasonsFor(g Gomega, o client.Object) []string {
	list := &corev1.EventList{}
	g.Expect(env.Client.List(ctx, list, client.InNamespace(o.GetNamespace()))).To(Succeed())
	var out []string
	for _, e := range list.Items {
		if e.InvolvedObject.Name == o.GetName() && e.Type == corev1.EventTypeWarning {
			out = append(out, e.Reason)
		}
	}
	return out
}

// clusterctl move deletes what it moved from the source as its
// deleteSourceObject does: the delete-for-move annotation, the delete, and
// every finalizer removed at once (the claims' Clusters are paused, so no
// release runs). None of the pool's records stays behind in the source, even
// when no manager ran while clusterctl deleted (the records bring the gone
// pool back to its controller when the manager starts).
func TestClusterctlMoveLeavesNoRecordOfTheMovedPoolInTheSource(t *testing.T) {
	g := NewWithT(t)
	stop := startIPAM(t)
	ns := namespace(t)
	cluster := createCluster(t, ns, "moving", false)
	pool := createPool(t, ns, "moved", spec(24, "10.134.0.0/24"))
	var claims []*ipamv1.IPAddressClaim
	for i := range 3 {
		c := createClaim(t, ns, claimName(i), "moved", inCluster("moving"))
		addressOf(t, c)
		claims = append(claims, c)
	}
	g.Eventually(func(g Gomega) {
		g.Expect(liveRecords(g, v1alpha1.MonolithIPPoolKind, ns, "moved")).To(HaveLen(3))
	}, timeout).Should(Succeed())

	// clusterctl pauses the Cluster first.
	pausePatch := client.MergeFrom(cluster.DeepCopy())
	cluster.Spec.Paused = ptr.To(true)
	g.Expect(env.Client.Patch(ctx, cluster, pausePatch)).To(Succeed())
	stop()

	deleteForMove := func(obj client.Object) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj)).To(Succeed())
		patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
		annotations := obj.GetAnnotations()
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[v1alpha1.ClusterctlDeleteForMoveAnnotation] = ""
		obj.SetAnnotations(annotations)
		g.Expect(env.Client.Patch(ctx, obj, patch)).To(Succeed())
		g.Expect(env.Client.Delete(ctx, obj)).To(Succeed())
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj)).To(Succeed())
		patch = client.MergeFrom(obj.DeepCopyObject().(client.Object))
		obj.SetFinalizers(nil)
		g.Expect(env.Client.Patch(ctx, obj, patch)).To(Succeed())
	}
	for _, c := range claims {
		deleteForMove(c)
	}
	deleteForMove(pool)
	expectGone(t, pool)
	startIPAM(t)
	g.Eventually(func(g Gomega) {
		list := &v1alpha1.MonolithIPAllocationList{}
		g.Expect(env.Client.List(ctx, list)).To(Succeed())
		for _, r := range list.Items {
			g.Expect(r.Spec.PoolRef.Namespace+"/"+r.Spec.PoolRef.Name).NotTo(Equal(ns+"/moved"), "record %s left behind", r.Name)
		}
	}, timeout).Should(Succeed())
}
