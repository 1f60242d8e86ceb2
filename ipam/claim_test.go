package ipam_test

import (
	"math"
	"net/netip"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/capi-monolith/capi-monolith/ipam/api/v1alpha1"
)

func TestTwoHundredClaimsAtOnceGetUniqueAddresses(t *testing.T) {
	g := NewWithT(t)
	startIPAM(t)
	ns := namespace(t)
	pool := createPool(t, ns, "pool", v1alpha1.IPPoolSpec{Addresses: []string{"10.10.0.0/24"}, Prefix: 24, Gateway: "10.10.0.1"})
	const n = 200
	claims := make([]*ipamv1.IPAddressClaim, n)
	for i := range claims {
		claims[i] = createClaim(t, ns, claimName(i), "pool", withAnnotation("x", "y"))
	}
	seen := map[string]string{}
	subnet := netip.MustParsePrefix("10.10.0.0/24")
	for _, c := range claims {
		a := addressOf(t, c)
		g.Expect(seen).NotTo(HaveKey(a.Spec.Address), "address handed out twice")
		seen[a.Spec.Address] = c.Name
		ip := addr(a.Spec.Address)
		g.Expect(subnet.Contains(ip)).To(BeTrue())
		g.Expect(ip).NotTo(BeElementOf(addr("10.10.0.0"), addr("10.10.0.1"), addr("10.10.0.255")), "network, gateway and broadcast are never handed out")
		g.Expect(a.Spec.Prefix).To(Equal(ptr.To[int32](24)))
		g.Expect(a.Spec.Gateway).To(Equal("10.10.0.1"))
		g.Expect(c.Finalizers).To(ContainElement(v1alpha1.ReleaseAddressFinalizer))
	}
	// The contract's shape of an IPAddress, checked on one.
	a := addressOf(t, claims[0])
	g.Expect(a.Finalizers).To(ContainElement(v1alpha1.ProtectAddressFinalizer))
	g.Expect(a.OwnerReferences).To(ContainElement(And(
		HaveField("Kind", "IPAddressClaim"), HaveField("Name", claims[0].Name),
		HaveField("Controller", ptr.To(true)), HaveField("BlockOwnerDeletion", ptr.To(true)))))
	g.Expect(a.OwnerReferences).To(ContainElement(And(
		HaveField("Kind", v1alpha1.MonolithIPPoolKind), HaveField("Name", "pool"), HaveField("BlockOwnerDeletion", ptr.To(true)))))
	g.Expect(a.Spec.PoolRef).To(Equal(ipamv1.IPPoolReference{APIGroup: v1alpha1.GroupVersion.Group, Kind: v1alpha1.MonolithIPPoolKind, Name: "pool"}))

	g.Eventually(func(g Gomega) {
		c := poolCounts(g, pool)
		g.Expect(c).NotTo(BeNil())
		g.Expect(*c).To(Equal(v1alpha1.IPAddressesStatus{Total: 253, Used: n, Free: 253 - n}))
		g.Expect(conditions.IsTrue(pool, v1alpha1.ReadyCondition)).To(BeTrue())
		g.Expect(pool.Finalizers).To(ContainElement(v1alpha1.ProtectPoolFinalizer))
	}, timeout).Should(Succeed())
}

func TestAddressesStayUniqueAcrossAManagerRestart(t *testing.T) {
	g := NewWithT(t)
	stop := startIPAM(t)
	ns := namespace(t)
	pool := createPool(t, ns, "pool", spec(22, "10.20.0.0/22"))
	var claims []*ipamv1.IPAddressClaim
	for i := range 100 {
		claims = append(claims, createClaim(t, ns, claimName(i), "pool"))
	}
	// Stop mid-way: some claims fulfilled, some not.
	g.Eventually(func(g Gomega) int {
		list := &ipamv1.IPAddressList{}
		g.Expect(env.Client.List(ctx, list, client.InNamespace(ns))).To(Succeed())
		return len(list.Items)
	}, timeout).Should(BeNumerically(">=", 10))
	stop()
	for i := 100; i < 200; i++ {
		claims = append(claims, createClaim(t, ns, claimName(i), "pool"))
	}
	startIPAM(t)

	seen := map[string]bool{}
	for _, c := range claims {
		a := addressOf(t, c)
		g.Expect(seen).NotTo(HaveKey(a.Spec.Address), "address handed out twice across the restart")
		seen[a.Spec.Address] = true
	}
	list := &ipamv1.IPAddressList{}
	g.Expect(env.Client.List(ctx, list, client.InNamespace(ns))).To(Succeed())
	g.Expect(list.Items).To(HaveLen(200), "one IPAddress per claim, none leaked")
	g.Eventually(func(g Gomega) int64 { return poolCounts(g, pool).Used }, timeout).Should(Equal(int64(200)))
}

func TestGlobalPoolServesClaimsFromEveryNamespace(t *testing.T) {
	g := NewWithT(t)
	startIPAM(t)
	global := createGlobalPool(t, "global-"+namespace(t), spec(24, "10.30.0.10-10.30.0.19"))
	seen := map[string]bool{}
	var nss []string
	for range 3 {
		ns := namespace(t)
		nss = append(nss, ns)
		// The same claim name in every namespace.
		a := addressOf(t, createClaim(t, ns, "same", global.Name, fromGlobal()))
		g.Expect(seen).NotTo(HaveKey(a.Spec.Address))
		seen[a.Spec.Address] = true
		g.Expect(a.Spec.PoolRef.Kind).To(Equal(v1alpha1.GlobalMonolithIPPoolKind))
	}
	g.Eventually(func(g Gomega) int64 { return poolCounts(g, global).Used }, timeout).Should(Equal(int64(3)))

	// A namespaced pool with the global pool's name is another pool.
	createPool(t, nss[0], global.Name, spec(24, "10.31.0.10-10.31.0.19"))
	a := addressOf(t, createClaim(t, nss[0], "local", global.Name))
	g.Expect(a.Spec.Address).To(Equal("10.31.0.10"))
	g.Expect(a.Spec.PoolRef.Kind).To(Equal(v1alpha1.MonolithIPPoolKind))

	// Same-named pools in two namespaces are two pools.
	createPool(t, nss[1], "twin", spec(24, "10.32.0.10-10.32.0.19"))
	createPool(t, nss[2], "twin", spec(24, "10.33.0.10-10.33.0.19"))
	g.Expect(addressOf(t, createClaim(t, nss[1], "t", "twin")).Spec.Address).To(Equal("10.32.0.10"))
	g.Expect(addressOf(t, createClaim(t, nss[2], "t", "twin")).Spec.Address).To(Equal("10.33.0.10"))
}

func TestExhaustedPoolAllocatesToAWaitingClaimWhenAnAddressIsReleased(t *testing.T) {
	g := NewWithT(t)
	startIPAM(t)
	ns := namespace(t)
	pool := createPool(t, ns, "small", spec(24, "10.40.0.10-10.40.0.11"))
	first := addressOf(t, createClaim(t, ns, "a", "small"))
	addressOf(t, createClaim(t, ns, "b", "small"))
	waiting := createClaim(t, ns, "c", "small")
	expectReason(t, waiting, ipamv1.IPAddressClaimReadyPoolExhaustedReason)
	g.Expect(conditions.Get(waiting, ipamv1.IPAddressClaimReadyCondition).Message).To(ContainSubstring("has no free address"))
	g.Eventually(func(g Gomega) int64 { return poolCounts(g, pool).Free }, timeout).Should(BeZero())

	g.Expect(env.Client.Delete(ctx, newClaim(ns, "a", "small"))).To(Succeed())
	expectGone(t, first)
	g.Expect(addressOf(t, waiting).Spec.Address).To(Equal(first.Spec.Address), "the waiting claim gets the released address with no manual step")

	for _, name := range []string{"b", "c"} {
		g.Expect(env.Client.Delete(ctx, newClaim(ns, name, "small"))).To(Succeed())
	}
	g.Eventually(func(g Gomega) int64 { return poolCounts(g, pool).Used }, timeout).Should(BeZero(), "every release shows in the pool's counts")
}

func TestReleasedAddressWaitsForItsReuseGracePeriod(t *testing.T) {
	g := NewWithT(t)
	startIPAM(t)
	ns := namespace(t)
	s := spec(24, "10.41.0.10")
	s.AddressReuseGracePeriodSeconds = 3
	createPool(t, ns, "graceful", s)
	held := addressOf(t, createClaim(t, ns, "a", "graceful"))
	g.Expect(env.Client.Delete(ctx, newClaim(ns, "a", "graceful"))).To(Succeed())
	expectGone(t, held)

	next := createClaim(t, ns, "b", "graceful")
	expectReason(t, next, ipamv1.IPAddressClaimReadyPoolExhaustedReason)
	g.Expect(addressOf(t, next).Spec.Address).To(Equal("10.41.0.10"), "reused once the grace period is over")
	status, _ := readyReason(g, next)
	g.Expect(status).To(Equal(metav1.ConditionTrue))
}

func TestPoolSizesAndFamilies(t *testing.T) {
	startIPAM(t)
	ns := namespace(t)
	tests := []struct {
		name  string
		spec  v1alpha1.IPPoolSpec
		want  v1alpha1.IPAddressesStatus
		first string
	}{
		{name: "an IPv6 /64 is counted exactly up to int64 and says it is capped", spec: spec(64, "fd00::/64"),
			want: v1alpha1.IPAddressesStatus{Total: math.MaxInt64, Used: 1, Free: math.MaxInt64, Capped: true}, first: "fd00::1"},
		{name: "an IPv4 /31 hands out both addresses", spec: spec(31, "10.50.0.0/31"),
			want: v1alpha1.IPAddressesStatus{Total: 2, Used: 1, Free: 1}, first: "10.50.0.0"},
		{name: "an IPv4 /32 hands out its one address", spec: spec(32, "10.51.0.7/32"),
			want: v1alpha1.IPAddressesStatus{Total: 1, Used: 1, Free: 0}, first: "10.51.0.7"},
		{name: "allocateReservedIPAddresses hands out network and broadcast", spec: v1alpha1.IPPoolSpec{Addresses: []string{"10.52.0.0/30"}, Prefix: 30, AllocateReservedIPAddresses: true},
			want: v1alpha1.IPAddressesStatus{Total: 4, Used: 1, Free: 3}, first: "10.52.0.0"},
		{name: "a /30 without reserved addresses keeps two", spec: spec(30, "10.53.0.0/30"),
			want: v1alpha1.IPAddressesStatus{Total: 2, Used: 1, Free: 1}, first: "10.53.0.1"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			name := claimName(i)
			pool := createPool(t, ns, name, tt.spec)
			g.Expect(addressOf(t, createClaim(t, ns, name, name)).Spec.Address).To(Equal(tt.first))
			g.Eventually(func(g Gomega) v1alpha1.IPAddressesStatus { return *poolCounts(g, pool) }, timeout).Should(Equal(tt.want))
		})
	}
}

func TestPausedClusterAndPausedClaimAreSkippedAndResume(t *testing.T) {
	g := NewWithT(t)
	startIPAM(t)
	ns := namespace(t)
	createPool(t, ns, "pool", spec(24, "10.60.0.0/24"))

	cluster := createCluster(t, ns, "paused", true)
	byCluster := createClaim(t, ns, "by-cluster", "pool", inCluster("paused"))
	byLabel := newClaim(ns, "by-label", "pool")
	byLabel.Labels = map[string]string{clusterv1.ClusterNameLabel: "paused"}
	g.Expect(env.Client.Create(ctx, byLabel)).To(Succeed())
	annotated := createClaim(t, ns, "annotated", "pool", withAnnotation(clusterv1.PausedAnnotation, ""))
	for _, c := range []*ipamv1.IPAddressClaim{byCluster, byLabel, annotated} {
		g.Eventually(func(g Gomega) bool {
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(c), c)).To(Succeed())
			return conditions.IsTrue(c, clusterv1.PausedCondition)
		}, timeout).Should(BeTrue(), c.Name)
	}
	g.Consistently(func(g Gomega) {
		list := &ipamv1.IPAddressList{}
		g.Expect(env.Client.List(ctx, list, client.InNamespace(ns))).To(Succeed())
		g.Expect(list.Items).To(BeEmpty())
	}, "2s").Should(Succeed(), "paused claims get no address")

	patch := client.MergeFrom(cluster.DeepCopy())
	cluster.Spec.Paused = ptr.To(false)
	g.Expect(env.Client.Patch(ctx, cluster, patch)).To(Succeed())
	addressOf(t, byCluster)
	addressOf(t, byLabel)

	patch = client.MergeFrom(annotated.DeepCopy())
	delete(annotated.Annotations, clusterv1.PausedAnnotation)
	g.Expect(env.Client.Patch(ctx, annotated, patch)).To(Succeed())
	addressOf(t, annotated)
}

func TestAMissingClusterNeverBlocksAllocationOrRelease(t *testing.T) {
	g := NewWithT(t)
	startIPAM(t)
	ns := namespace(t)
	createPool(t, ns, "pool", spec(24, "10.61.0.0/24"))
	c := createClaim(t, ns, "orphan", "pool", inCluster("gone"))
	a := addressOf(t, c)
	g.Expect(a.Labels).To(HaveKeyWithValue(clusterv1.ClusterNameLabel, "gone"), "the cluster name is copied to the IPAddress")
	g.Expect(env.Client.Delete(ctx, c)).To(Succeed())
	expectGone(t, a)
	expectGone(t, c)
}

func TestClaimOfAClusterBeingDeletedIsReleased(t *testing.T) {
	g := NewWithT(t)
	startIPAM(t)
	ns := namespace(t)
	createPool(t, ns, "pool", spec(24, "10.62.0.0/24"))
	cluster := createCluster(t, ns, "dying", false)
	c := createClaim(t, ns, "claim", "pool", inCluster("dying"))
	a := addressOf(t, c)
	patch := client.MergeFrom(cluster.DeepCopy())
	cluster.Finalizers = []string{"test.capi-monolith.dev/hold"}
	g.Expect(env.Client.Patch(ctx, cluster, patch)).To(Succeed())
	g.Expect(env.Client.Delete(ctx, cluster)).To(Succeed())
	g.Expect(env.Client.Delete(ctx, c)).To(Succeed())
	expectGone(t, a)
	expectGone(t, c)
	patch = client.MergeFrom(cluster.DeepCopy())
	cluster.Finalizers = nil
	g.Expect(env.Client.Patch(ctx, cluster, patch)).To(Succeed())
}

func TestDeletedIPAddressIsRecreatedIdentically(t *testing.T) {
	g := NewWithT(t)
	startIPAM(t)
	ns := namespace(t)
	createPool(t, ns, "pool", v1alpha1.IPPoolSpec{Addresses: []string{"10.63.0.0/24"}, Prefix: 24, Gateway: "10.63.0.1"})
	c := createClaim(t, ns, "claim", "pool")
	before := addressOf(t, c)
	// Another claim in between must not take the address while it is gone.
	g.Expect(env.Client.Delete(ctx, before)).To(Succeed())
	other := createClaim(t, ns, "other", "pool")
	g.Eventually(func(g Gomega) {
		after := &ipamv1.IPAddress{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(before), after)).To(Succeed())
		g.Expect(after.UID).NotTo(Equal(before.UID), "a new object")
		g.Expect(after.DeletionTimestamp).To(BeNil())
		g.Expect(after.Spec).To(Equal(before.Spec), "with identical values")
	}, timeout).Should(Succeed())
	g.Expect(addressOf(t, other).Spec.Address).NotTo(Equal(before.Spec.Address))
}

func TestOrphanIPAddressIsAdoptedWithItsAddress(t *testing.T) {
	g := NewWithT(t)
	startIPAM(t)
	ns := namespace(t)
	createPool(t, ns, "pool", spec(24, "10.64.0.0/24"))
	// As `clusterctl move` leaves it: the object without owner references.
	orphan := &ipamv1.IPAddress{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "moved"},
		Spec: ipamv1.IPAddressSpec{
			ClaimRef: ipamv1.IPAddressClaimReference{Name: "moved"},
			PoolRef:  ipamv1.IPPoolReference{APIGroup: v1alpha1.GroupVersion.Group, Kind: v1alpha1.MonolithIPPoolKind, Name: "pool"},
			Address:  "10.64.0.77", Prefix: ptr.To[int32](24),
		},
	}
	g.Expect(env.Client.Create(ctx, orphan)).To(Succeed())
	// A fresh claim must not be given the moved address.
	g.Expect(addressOf(t, createClaim(t, ns, "fresh", "pool")).Spec.Address).To(Equal("10.64.0.1"))
	a := addressOf(t, createClaim(t, ns, "moved", "pool"))
	g.Expect(a.UID).To(Equal(orphan.UID), "adopted, not re-created")
	g.Expect(a.Spec.Address).To(Equal("10.64.0.77"))
	g.Expect(a.OwnerReferences).To(ContainElement(HaveField("Kind", "IPAddressClaim")))
	g.Expect(a.Finalizers).To(ContainElement(v1alpha1.ProtectAddressFinalizer))
}

func TestStaticReservation(t *testing.T) {
	g := NewWithT(t)
	startIPAM(t)
	ns := namespace(t)
	createPool(t, ns, "pool", v1alpha1.IPPoolSpec{Addresses: []string{"10.65.0.0/24"}, Prefix: 24, ExcludedAddresses: []string{"10.65.0.100"}})
	g.Expect(addressOf(t, createClaim(t, ns, "static", "pool", withAnnotation(v1alpha1.RequestedAddressAnnotation, "10.65.0.50"))).Spec.Address).To(Equal("10.65.0.50"))

	taken := createClaim(t, ns, "taken", "pool", withAnnotation(v1alpha1.RequestedAddressAnnotation, "10.65.0.50"))
	expectReason(t, taken, ipamv1.IPAddressClaimReadyAllocationFailedReason)
	g.Expect(conditions.Get(taken, ipamv1.IPAddressClaimReadyCondition).Message).To(ContainSubstring("10.65.0.50 is already in use"))

	for name, value := range map[string]string{"excluded": "10.65.0.100", "outside": "10.99.0.1", "garbage": "not-an-ip"} {
		c := createClaim(t, ns, name, "pool", withAnnotation(v1alpha1.RequestedAddressAnnotation, value))
		expectReason(t, c, ipamv1.IPAddressClaimReadyAllocationFailedReason)
	}
}

func TestClaimsOfOtherProvidersAreIgnored(t *testing.T) {
	g := NewWithT(t)
	startIPAM(t)
	ns := namespace(t)
	createPool(t, ns, "pool", spec(24, "10.66.0.0/24"))
	foreign := newClaim(ns, "foreign", "pool")
	foreign.Spec.PoolRef.APIGroup = "ipam.example.com"
	otherKind := newClaim(ns, "other-kind", "pool")
	otherKind.Spec.PoolRef.Kind = "InClusterIPPool"
	for _, c := range []*ipamv1.IPAddressClaim{foreign, otherKind} {
		g.Expect(env.Client.Create(ctx, c)).To(Succeed())
	}
	addressOf(t, createClaim(t, ns, "ours", "pool")) // the controller is running
	g.Consistently(func(g Gomega) {
		for _, c := range []*ipamv1.IPAddressClaim{foreign, otherKind} {
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(c), c)).To(Succeed())
			g.Expect(c.Finalizers).To(BeEmpty())
			g.Expect(c.Status.Conditions).To(BeEmpty())
		}
	}, "2s").Should(Succeed())
}

func TestInvalidPoolWithWebhooksOffAllocatesNothing(t *testing.T) {
	g := NewWithT(t)
	startIPAM(t)
	ns := namespace(t)
	// Only the webhook rejects these; the controller must stay safe.
	pool := createPool(t, ns, "bad", spec(24, "10.70.0.20-10.70.0.10", "fd00::1"))
	c := createClaim(t, ns, "claim", "bad")
	expectReason(t, c, ipamv1.IPAddressClaimReadyPoolNotReadyReason)
	g.Eventually(func(g Gomega) string {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(pool), pool)).To(Succeed())
		cond := conditions.Get(pool, v1alpha1.ReadyCondition)
		if cond == nil {
			return ""
		}
		return cond.Reason + ": " + cond.Message
	}, timeout).Should(And(HavePrefix(v1alpha1.InvalidSpecReason), ContainSubstring("range start is after range end")))

	// Fixing the pool fulfils the waiting claim.
	patch := client.MergeFrom(pool.DeepCopy())
	pool.Spec.Addresses = []string{"10.70.0.10-10.70.0.20"}
	g.Expect(env.Client.Patch(ctx, pool, patch)).To(Succeed())
	g.Expect(addressOf(t, c).Spec.Address).To(Equal("10.70.0.10"))
}

func TestPoolDeletionWaitsForItsAddresses(t *testing.T) {
	g := NewWithT(t)
	startIPAM(t)
	ns := namespace(t)
	pool := createPool(t, ns, "pool", spec(24, "10.71.0.0/24"))
	c := createClaim(t, ns, "claim", "pool")
	addressOf(t, c)
	g.Expect(env.Client.Delete(ctx, pool)).To(Succeed())
	g.Eventually(func(g Gomega) string {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(pool), pool)).To(Succeed())
		if cond := conditions.Get(pool, v1alpha1.ReadyCondition); cond != nil {
			return cond.Reason
		}
		return ""
	}, timeout).Should(Equal(v1alpha1.DeletionBlockedReason))
	g.Expect(env.Client.Delete(ctx, c)).To(Succeed())
	expectGone(t, pool)

	// The escape hatch for clusterctl move.
	moved := createPool(t, ns, "moved", spec(24, "10.72.0.0/24"))
	addressOf(t, createClaim(t, ns, "kept", "moved"))
	patch := client.MergeFrom(moved.DeepCopy())
	moved.Annotations = map[string]string{v1alpha1.SkipDeleteProtectionAnnotation: "true"}
	g.Expect(env.Client.Patch(ctx, moved, patch)).To(Succeed())
	g.Expect(env.Client.Delete(ctx, moved)).To(Succeed())
	expectGone(t, moved)
}

func TestAddressesLeftOutsideAShrunkPoolCountAsOutOfRangeNotUsed(t *testing.T) {
	g := NewWithT(t)
	startIPAM(t)
	ns := namespace(t)
	pool := createPool(t, ns, "shrinking", spec(24, "10.90.0.10-10.90.0.19"))
	var last *ipamv1.IPAddress
	for i := range 3 {
		last = addressOf(t, createClaim(t, ns, claimName(i), "shrinking"))
	}
	g.Expect(last.Spec.Address).To(Equal("10.90.0.12"))
	// Only possible with the webhook off: the change strands 10.90.0.12.
	patch := client.MergeFrom(pool.DeepCopy())
	pool.Spec.Addresses = []string{"10.90.0.10-10.90.0.11", "10.90.0.20-10.90.0.29"}
	g.Expect(env.Client.Patch(ctx, pool, patch)).To(Succeed())
	g.Eventually(func(g Gomega) v1alpha1.IPAddressesStatus { return *poolCounts(g, pool) }, timeout).Should(Equal(
		v1alpha1.IPAddressesStatus{Total: 12, Used: 2, Free: 10, OutOfRange: 1}))
	// The stranded address is still held: nobody else gets it.
	next := addressOf(t, createClaim(t, ns, "next", "shrinking"))
	g.Expect(next.Spec.Address).To(Equal("10.90.0.20"))
}
