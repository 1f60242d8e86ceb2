package ipam_test

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/capi-monolith/capi-monolith/ipam/api/v1alpha1"
)

// preMadeAddress creates an IPAddress of pool, as another allocator, an
// older release without allocation records or a restore leaves it: no
// record, no claim behind it.
func preMadeAddress(t *testing.T, ns, name, pool, address string) *ipamv1.IPAddress {
	t.Helper()
	a := &ipamv1.IPAddress{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: ipamv1.IPAddressSpec{
			ClaimRef: ipamv1.IPAddressClaimReference{Name: name},
			PoolRef:  ipamv1.IPPoolReference{APIGroup: v1alpha1.GroupVersion.Group, Kind: v1alpha1.MonolithIPPoolKind, Name: pool},
			Address:  address,
			Prefix:   ptr.To[int32](24),
		},
	}
	NewWithT(t).Expect(env.Client.Create(ctx, a)).To(Succeed())
	return a
}

// The measured bug of issue 28, scaled down: a pool whose range already
// holds IPAddresses that have no allocation record. New claims must avoid
// every one of them, those there before the manager started and those
// made while it runs.
func TestPreMadeIPAddressesWithoutRecordsAreNeverHandedOutAgain(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	pool := createPool(t, ns, "pre", spec(24, "10.150.0.1-10.150.0.254"))
	taken := map[string]string{}
	// Every other address before the manager starts: the free ones are
	// scattered, so only a ledger that knows all of them gets it right.
	for i := 1; i <= 200; i++ {
		if i%4 == 0 {
			continue
		}
		addr := fmt.Sprintf("10.150.0.%d", i)
		taken[addr] = preMadeAddress(t, ns, fmt.Sprintf("pre-%03d", i), "pre", addr).Name
	}
	startIPAM(t)
	first := createClaims(t, ns, "c", "pre", 40)
	// More while it runs, above the range the first claims took.
	for i := 201; i <= 240; i++ {
		addr := fmt.Sprintf("10.150.0.%d", i)
		taken[addr] = preMadeAddress(t, ns, fmt.Sprintf("late-%03d", i), "pre", addr).Name
	}
	g.Eventually(func(g Gomega) {
		g.Expect(poolCounts(g, pool).Used).To(BeEquivalentTo(len(taken)+40), "the pool counts every IPAddress naming it")
	}, timeout).Should(Succeed())
	second := createClaims(t, ns, "d", "pre", 24)
	got := expectDistinct(t, append(first, second...))
	for addr, claim := range got {
		g.Expect(taken).NotTo(HaveKey(addr), "%s handed out to %s, but IPAddress %s has it", addr, claim, taken[addr])
	}
}

// An upgrade from a release without records: every claim already has its
// IPAddress and no record. A new claim reconciled before them must not get
// any of their addresses, and each old claim keeps its own.
func TestAnUpgradeFromAReleaseWithoutRecordsLosesNoAddress(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	createPool(t, ns, "old", spec(24, "10.151.0.10-10.151.0.19"))
	var old []*ipamv1.IPAddressClaim
	for i := range 9 {
		// Paused, so that none is recorded before the new claim is served:
		// only their IPAddresses say the addresses are taken.
		c := createClaim(t, ns, claimName(i), "old", withAnnotation(clusterv1.PausedAnnotation, ""))
		preMadeAddress(t, ns, c.Name, "old", fmt.Sprintf("10.151.0.%d", 10+i))
		old = append(old, c)
	}
	startIPAM(t)
	fresh := createClaim(t, ns, "fresh", "old")
	g.Expect(addressOf(t, fresh).Spec.Address).To(Equal("10.151.0.19"), "the only address no IPAddress has")
	g.Expect(liveRecords(g, v1alpha1.MonolithIPPoolKind, ns, "old")).To(HaveLen(1), "the old claims are not recorded yet")
	for _, c := range old {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(c), c)).To(Succeed())
		patch := client.MergeFrom(c.DeepCopy())
		delete(c.Annotations, clusterv1.PausedAnnotation)
		g.Expect(env.Client.Patch(ctx, c, patch)).To(Succeed())
	}
	for i, c := range old {
		g.Expect(addressOf(t, c).Spec.Address).To(Equal(fmt.Sprintf("10.151.0.%d", 10+i)))
	}
	g.Eventually(func(g Gomega) {
		g.Expect(liveRecords(g, v1alpha1.MonolithIPPoolKind, ns, "old")).To(HaveLen(10), "each old address got its record")
	}, timeout).Should(Succeed())
}

func TestAnIPAddressMadeInAdvanceUnderAClaimsNameIsAdoptedOnlyFromThePool(t *testing.T) {
	g := NewWithT(t)
	startIPAM(t)
	ns := namespace(t)
	createPool(t, ns, "pool", spec(24, "10.152.0.10-10.152.0.20"))
	preMadeAddress(t, ns, "outside", "pool", "10.152.0.99")
	preMadeAddress(t, ns, "inside", "pool", "10.152.0.15")
	outside := createClaim(t, ns, "outside", "pool")
	inside := createClaim(t, ns, "inside", "pool")
	g.Expect(addressOf(t, inside).Spec.Address).To(Equal("10.152.0.15"))
	expectReason(t, outside, ipamv1.IPAddressClaimReadyAllocationFailedReason)
	g.Expect(readyMessage(g, outside)).To(ContainSubstring("10.152.0.99"))
	g.Consistently(func(g Gomega) {
		status, _ := readyReason(g, outside)
		g.Expect(status).To(Equal(metav1.ConditionFalse))
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: "v4-10.152.0.99"}, &v1alpha1.MonolithIPAllocation{})).NotTo(Succeed(), "no record for an address outside the pool")
	}, 2*time.Second, 200*time.Millisecond).Should(Succeed())
}

// Sequence (1) of issue 28: a pool deleted with skip-delete-protection
// while a claim holds an address loses its records, not the claim's
// IPAddress; the pool re-created must not hand that address out again.
func TestAPoolDeletedAndRecreatedNeverHandsOutAnAddressAnIPAddressHolds(t *testing.T) {
	g := NewWithT(t)
	startIPAM(t)
	ns := namespace(t)
	pool := createPool(t, ns, "again", spec(24, "10.153.0.10-10.153.0.11"))
	held := createClaim(t, ns, "held", "again")
	g.Expect(addressOf(t, held).Spec.Address).To(Equal("10.153.0.10"))
	patch := client.MergeFrom(pool.DeepCopy())
	pool.Annotations = map[string]string{v1alpha1.SkipDeleteProtectionAnnotation: "true"}
	g.Expect(env.Client.Patch(ctx, pool, patch)).To(Succeed())
	g.Expect(env.Client.Delete(ctx, pool)).To(Succeed())
	expectGone(t, pool)
	g.Eventually(func(g Gomega) {
		g.Expect(liveRecords(g, v1alpha1.MonolithIPPoolKind, ns, "again")).To(BeEmpty())
	}, timeout).Should(Succeed())

	createPool(t, ns, "again", spec(24, "10.153.0.10-10.153.0.11"))
	next := createClaim(t, ns, "next", "again")
	g.Expect(addressOf(t, next).Spec.Address).To(Equal("10.153.0.11"), ".10 is still held by claim held's IPAddress")
	g.Eventually(func(g Gomega) {
		g.Expect(liveRecords(g, v1alpha1.MonolithIPPoolKind, ns, "again")).To(HaveLen(2), "the held address is recorded again")
	}, timeout).Should(Succeed())
}

// dropFinalizersAndDelete deletes obj the way a user removing finalizers
// by hand (or clusterctl move) does: nothing of ours runs for it.
func dropFinalizersAndDelete(t *testing.T, obj client.Object) {
	t.Helper()
	g := NewWithT(t)
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj)).To(Succeed())
	patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
	obj.SetFinalizers(nil)
	g.Expect(env.Client.Patch(ctx, obj, patch)).To(Succeed())
	g.Expect(env.Client.Delete(ctx, obj)).To(Succeed())
	expectGone(t, obj)
}

func TestTheSweepCollectsRecordsWhoseClaimIsGone(t *testing.T) {
	g := NewWithT(t)
	stop := startIPAM(t)
	ns := namespace(t)
	createGlobalPool(t, "swept", spec(24, "10.154.0.10-10.154.0.20"))
	gone := createClaim(t, ns, "gone", "swept", fromGlobal())
	kept := createClaim(t, ns, "kept", "swept", fromGlobal())
	goneAddress := addressOf(t, gone)
	addressOf(t, kept)
	stop()
	// Gone without a release: the record of its address stays behind.
	dropFinalizersAndDelete(t, goneAddress)
	dropFinalizersAndDelete(t, gone)
	g.Expect(liveRecords(g, v1alpha1.GlobalMonolithIPPoolKind, "", "swept")).To(HaveLen(2))

	startIPAM(t)
	g.Eventually(func(g Gomega) {
		recs := liveRecords(g, v1alpha1.GlobalMonolithIPPoolKind, "", "swept")
		g.Expect(recs).To(HaveLen(1), "the orphan record is collected")
		g.Expect(recs[0].Spec.ClaimRef.Name).To(Equal("kept"))
	}, timeout).Should(Succeed())
	again := createClaim(t, ns, "again", "swept", fromGlobal())
	g.Expect(addressOf(t, again).Spec.Address).To(Equal(goneAddress.Spec.Address), "its address is free again")
}

// A cluster moved away and back: its claim and IPAddress come back under
// the same names (new uids), while the record of the earlier claim stayed.
// The claim gets its address back instead of being blocked by its own past.
func TestAClaimMovedBackIsNotBlockedByItsOwnOldRecord(t *testing.T) {
	g := NewWithT(t)
	stop := startIPAM(t)
	ns := namespace(t)
	createGlobalPool(t, "roundtrip", spec(24, "10.155.0.10-10.155.0.20"))
	c := createClaim(t, ns, "moved", "roundtrip", fromGlobal())
	before := addressOf(t, c)
	oldUID := c.UID
	stop()
	dropFinalizersAndDelete(t, before)
	dropFinalizersAndDelete(t, c)

	back := createClaim(t, ns, "moved", "roundtrip", fromGlobal())
	g.Expect(back.UID).NotTo(Equal(oldUID))
	address := before.DeepCopy()
	address.ObjectMeta = metav1.ObjectMeta{Namespace: ns, Name: "moved"}
	g.Expect(env.Client.Create(ctx, address)).To(Succeed())
	startIPAM(t)
	g.Expect(addressOf(t, back).Spec.Address).To(Equal(before.Spec.Address))
	g.Eventually(func(g Gomega) {
		recs := liveRecords(g, v1alpha1.GlobalMonolithIPPoolKind, "", "roundtrip")
		g.Expect(recs).To(HaveLen(1))
		g.Expect(recs[0].Spec.ClaimRef.UID).To(Equal(string(back.UID)), "the record names the claim that is there now")
	}, timeout).Should(Succeed())
}

// With webhooks off nothing stops the allow-overlap annotation from
// changing under a pool with records; the controller then hands nothing
// out of it (records named two ways would let two claims hold one address)
// until the annotation is restored.
func TestAPoolWhoseAllowOverlapAnnotationChangedUnderItsRecordsHandsOutNothing(t *testing.T) {
	g := NewWithT(t)
	startIPAM(t)
	ns := namespace(t)
	pool := createPool(t, ns, "toggled", spec(24, "10.156.0.10-10.156.0.20"))
	addressOf(t, createClaim(t, ns, "first", "toggled"))
	patch := client.MergeFrom(pool.DeepCopy())
	pool.Annotations = map[string]string{v1alpha1.AllowOverlapAnnotation: "true"}
	g.Expect(env.Client.Patch(ctx, pool, patch)).To(Succeed())

	second := createClaim(t, ns, "second", "toggled")
	expectReason(t, second, ipamv1.IPAddressClaimReadyPoolNotReadyReason)
	g.Expect(readyMessage(g, second)).To(ContainSubstring(v1alpha1.AllowOverlapAnnotation))
	g.Eventually(func(g Gomega) string {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(pool), pool)).To(Succeed())
		for _, c := range pool.Status.Conditions {
			if c.Type == v1alpha1.ReadyCondition {
				return c.Reason
			}
		}
		return ""
	}, timeout).Should(Equal(v1alpha1.InvalidSpecReason))

	patch = client.MergeFrom(pool.DeepCopy())
	delete(pool.Annotations, v1alpha1.AllowOverlapAnnotation)
	g.Expect(env.Client.Patch(ctx, pool, patch)).To(Succeed())
	g.Expect(addressOf(t, second).Spec.Address).To(Equal("10.156.0.11"))
}
