package ledger

import (
	"context"
	"net/netip"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/capi-monolith/capi-monolith/ipam/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/ipam/internal/index"
	"github.com/capi-monolith/capi-monolith/ipam/internal/records"
)

func claimID(name, uid string) records.Claim {
	return records.Claim{NamespacedName: types.NamespacedName{Namespace: "ns", Name: name}, UID: types.UID(uid)}
}

func record(c records.Claim, addr string) *v1alpha1.MonolithIPAllocation {
	return &v1alpha1.MonolithIPAllocation{
		ObjectMeta: metav1.ObjectMeta{Name: "v4-" + addr},
		Spec: v1alpha1.MonolithIPAllocationSpec{
			Address: addr, Prefix: 24,
			PoolRef:  v1alpha1.AllocationPoolReference{Kind: v1alpha1.MonolithIPPoolKind, Namespace: "ns", Name: "pool"},
			ClaimRef: v1alpha1.AllocationClaimReference{Namespace: c.Namespace, Name: c.Name, UID: string(c.UID)},
		},
	}
}

func released(r *v1alpha1.MonolithIPAllocation, until time.Time) *v1alpha1.MonolithIPAllocation {
	r = r.DeepCopy()
	r.Status.ReleasedAt = &metav1.Time{Time: time.Now()}
	r.Status.ReusableAfter = &metav1.Time{Time: until}
	return r
}

// newLedger returns a ledger over a fake cache holding recs, and the state
// of pool 10.0.0.10-10.0.0.12.
func newLedger(t *testing.T, grace int32, recs ...client.Object) (*Ledger, *Pool) {
	t.Helper()
	g := NewWithT(t)
	scheme := runtime.NewScheme()
	g.Expect(v1alpha1.AddToScheme(scheme)).To(Succeed())
	g.Expect(ipamv1.AddToScheme(scheme)).To(Succeed())
	reader := fake.NewClientBuilder().WithScheme(scheme).WithObjects(recs...).
		WithIndex(&v1alpha1.MonolithIPAllocation{}, index.AllocationPoolField, func(o client.Object) []string {
			return []string{index.KeyOfAllocation(o.(*v1alpha1.MonolithIPAllocation)).String()}
		}).
		WithIndex(&ipamv1.IPAddress{}, index.IPAddressPoolField, func(o client.Object) []string {
			a := o.(*ipamv1.IPAddress)
			if k, ok := index.KeyOfRef(a.Spec.PoolRef, a.Namespace); ok {
				return []string{k.String()}
			}
			return nil
		}).Build()
	l := New(reader)
	pool := &v1alpha1.MonolithIPPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pool"},
		Spec:       v1alpha1.IPPoolSpec{Addresses: []string{"10.0.0.10-10.0.0.12"}, Prefix: 24, AddressReuseGracePeriodSeconds: grace},
	}
	p, err := l.For(context.Background(), pool)
	g.Expect(err).NotTo(HaveOccurred())
	return l, p
}

func TestLateEventsNeverFreeAnAddressALiveClaimHolds(t *testing.T) {
	a, b, c := claimID("a", "uid-a"), claimID("b", "uid-b"), claimID("c", "uid-c")
	tests := []struct {
		name string
		// late replays events that arrive after b holds a's old address.
		late func(l *Ledger, old *v1alpha1.MonolithIPAllocation)
	}{
		{
			name: "the released claim's record seen again, then deleted, frees nothing",
			late: func(l *Ledger, old *v1alpha1.MonolithIPAllocation) {
				l.OnExists(old)
				l.OnDeleted(old)
			},
		},
		{
			name: "a delete seen through a tombstone frees nothing",
			late: func(l *Ledger, old *v1alpha1.MonolithIPAllocation) {
				l.OnDeleted(toolscache.DeletedFinalStateUnknown{Key: old.Name, Obj: old})
			},
		},
		{
			name: "a claim re-created under the same name does not inherit or free the address",
			late: func(l *Ledger, _ *v1alpha1.MonolithIPAllocation) {
				again := record(claimID("a", "uid-a2"), "10.0.0.10")
				l.OnExists(again)
				l.OnDeleted(again)
			},
		},
		{
			name: "a foreign record of another claim for the address, created and deleted, frees nothing",
			late: func(l *Ledger, _ *v1alpha1.MonolithIPAllocation) {
				foreign := record(claimID("intruder", "uid-x"), "10.0.0.10")
				l.OnExists(foreign)
				l.OnDeleted(foreign)
			},
		},
		{
			name: "a late released copy of the old record frees nothing",
			late: func(l *Ledger, old *v1alpha1.MonolithIPAllocation) {
				l.OnExists(released(old, time.Now().Add(-time.Minute)))
				l.OnDeleted(released(old, time.Now().Add(-time.Minute)))
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			l, p := newLedger(t, 0)
			got, err := p.Allocate(a, netip.Addr{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(netip.MustParseAddr("10.0.0.10")))
			old := record(a, "10.0.0.10")
			l.OnExists(old)
			p.ReleaseClaim(a, time.Time{})
			got, err = p.Allocate(b, netip.Addr{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(netip.MustParseAddr("10.0.0.10")), "the released address is reused at once")

			tt.late(l, old)

			got, err = p.Allocate(c, netip.Addr{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).NotTo(Equal(netip.MustParseAddr("10.0.0.10")), "b still holds .10")
			held, ok := p.AddressOf(b)
			g.Expect(ok).To(BeTrue())
			g.Expect(held).To(Equal(netip.MustParseAddr("10.0.0.10")))
		})
	}
}

func TestTakenAddressIsNeverOfferedAgainUntilItsRecordGoes(t *testing.T) {
	g := NewWithT(t)
	l, p := newLedger(t, 0)
	a, other := claimID("a", "uid-a"), claimID("other", "uid-o")
	got, err := p.Allocate(a, netip.Addr{})
	g.Expect(err).NotTo(HaveOccurred())
	// Another manager's record won the address at the apiserver.
	theirs := record(other, got.String())
	p.Taken(a, got, theirs)
	next, err := p.Allocate(a, netip.Addr{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(next).NotTo(Equal(got))
	l.OnDeleted(theirs)
	third, err := p.Allocate(claimID("c", "uid-c"), netip.Addr{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(third).To(Equal(got), "freed once the other claim's record is gone")
}

func TestRebuildFromRecordsKeepsHoldsAndGracePeriods(t *testing.T) {
	g := NewWithT(t)
	a, b := claimID("a", "uid-a"), claimID("b", "uid-b")
	cooling := released(record(a, "10.0.0.10"), time.Now().Add(time.Hour))
	expired := released(record(claimID("old", "uid-old"), "10.0.0.12"), time.Now().Add(-time.Second))
	expired.Name = "v4-10.0.0.12"
	_, p := newLedger(t, 60, cooling, record(b, "10.0.0.11"), expired)
	held, ok := p.AddressOf(b)
	g.Expect(ok).To(BeTrue())
	g.Expect(held).To(Equal(netip.MustParseAddr("10.0.0.11")))
	g.Expect(p.Allocator().InGracePeriod(netip.MustParseAddr("10.0.0.10"))).To(BeTrue(), "the grace period survives a restart")
	got, err := p.Allocate(claimID("c", "uid-c"), netip.Addr{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(netip.MustParseAddr("10.0.0.12")), "an expired record's address is free")
	_, err = p.Allocate(claimID("d", "uid-d"), netip.Addr{})
	g.Expect(err).To(HaveOccurred(), "the cooling address is not handed out")
}

func TestInvalidSpecKeepsTheLastAllocatorAndItsHolds(t *testing.T) {
	g := NewWithT(t)
	l, p := newLedger(t, 0)
	a := claimID("a", "uid-a")
	got, err := p.Allocate(a, netip.Addr{})
	g.Expect(err).NotTo(HaveOccurred())
	bad := &v1alpha1.MonolithIPPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pool"},
		Spec:       v1alpha1.IPPoolSpec{Addresses: []string{"not-an-address"}, Prefix: 24},
	}
	p2, err := l.For(context.Background(), bad)
	g.Expect(err).To(MatchError(ErrInvalidPool))
	g.Expect(p2).To(BeIdenticalTo(p))
	g.Expect(p.Allocator()).NotTo(BeNil())
	_, err = p.Allocate(claimID("b", "uid-b"), netip.Addr{})
	g.Expect(err).To(MatchError(ErrInvalidPool), "nothing is handed out from an invalid pool")
	p.ReleaseClaim(a, time.Time{}) // never panics
	held, _ := p.AddressOf(a)
	g.Expect(held).NotTo(Equal(got))
}

// ipAddress is an IPAddress of the test pool named name, holding addr,
// made by anyone: no record goes with it.
func ipAddress(name, addr string) *ipamv1.IPAddress {
	return &ipamv1.IPAddress{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec: ipamv1.IPAddressSpec{
			ClaimRef: ipamv1.IPAddressClaimReference{Name: name},
			PoolRef:  ipamv1.IPPoolReference{APIGroup: v1alpha1.GroupVersion.Group, Kind: v1alpha1.MonolithIPPoolKind, Name: "pool"},
			Address:  addr,
		},
	}
}

func TestIPAddressesWithoutRecordsHoldTheirAddresses(t *testing.T) {
	ten, eleven, twelve := netip.MustParseAddr("10.0.0.10"), netip.MustParseAddr("10.0.0.11"), netip.MustParseAddr("10.0.0.12")
	t.Run("IPAddresses in the cache when the pool is built are never handed out", func(t *testing.T) {
		g := NewWithT(t)
		_, p := newLedger(t, 0, ipAddress("pre-0", "10.0.0.10"), ipAddress("pre-1", "10.0.0.12"))
		got, err := p.Allocate(claimID("a", "uid-a"), netip.Addr{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got).To(Equal(eleven))
		_, err = p.Allocate(claimID("b", "uid-b"), netip.Addr{})
		g.Expect(err).To(HaveOccurred(), "the two pre-made addresses are held")
		_, err = p.Allocate(claimID("c", "uid-c"), ten)
		g.Expect(err).To(HaveOccurred(), "not even when asked for")
		g.Expect(p.Allocator().Counts().Int64().Used).To(BeEquivalentTo(3))
	})
	t.Run("an IPAddress seen later holds its address until it is deleted", func(t *testing.T) {
		g := NewWithT(t)
		l, p := newLedger(t, 0)
		foreign := ipAddress("foreign", "10.0.0.10")
		l.OnAddressExists(foreign)
		got, err := p.Allocate(claimID("a", "uid-a"), netip.Addr{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got).To(Equal(eleven))
		l.OnAddressDeleted(toolscache.DeletedFinalStateUnknown{Key: "ns/foreign", Obj: foreign})
		got, err = p.Allocate(claimID("b", "uid-b"), netip.Addr{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got).To(Equal(ten), "freed once the IPAddress is gone")
	})
	t.Run("a record deleted while an IPAddress still has the address frees nothing", func(t *testing.T) {
		g := NewWithT(t)
		a := claimID("a", "uid-a")
		rec := record(a, "10.0.0.10")
		l, p := newLedger(t, 0, rec, ipAddress("a", "10.0.0.10"))
		l.OnDeleted(rec)
		got, err := p.Allocate(claimID("b", "uid-b"), netip.Addr{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got).To(Equal(eleven), "the IPAddress still holds .10")
	})
	t.Run("a claim released before its IPAddress's delete is seen keeps the address until then", func(t *testing.T) {
		g := NewWithT(t)
		l, p := newLedger(t, 0)
		a := claimID("a", "uid-a")
		got, err := p.Allocate(a, netip.Addr{})
		g.Expect(err).NotTo(HaveOccurred())
		own := ipAddress("a", got.String())
		l.OnExists(record(a, got.String()))
		l.OnAddressExists(own)
		p.ReleaseClaim(a, time.Time{})
		l.OnDeleted(record(a, got.String()))
		next, err := p.Allocate(claimID("b", "uid-b"), netip.Addr{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(next).To(Equal(eleven), "the IPAddress's delete is not seen yet")
		l.OnAddressDeleted(own)
		again, err := p.Allocate(claimID("c", "uid-c"), netip.Addr{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(again).To(Equal(ten))
		_, err = p.Allocate(claimID("d", "uid-d"), twelve)
		g.Expect(err).NotTo(HaveOccurred())
	})
}

func TestAPoolWhoseOverlapAnnotationDisagreesWithItsRecordsHandsOutNothing(t *testing.T) {
	g := NewWithT(t)
	l, _ := newLedger(t, 0, record(claimID("a", "uid-a"), "10.0.0.10"))
	pool := &v1alpha1.MonolithIPPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pool", Annotations: map[string]string{v1alpha1.AllowOverlapAnnotation: "true"}},
		Spec:       v1alpha1.IPPoolSpec{Addresses: []string{"10.0.0.10-10.0.0.12"}, Prefix: 24},
	}
	_, err := l.For(context.Background(), pool)
	g.Expect(err).To(MatchError(ErrInvalidPool))
	g.Expect(err).To(MatchError(ErrOverlapAnnotationChanged))

	pool.Annotations = nil
	_, err = l.For(context.Background(), pool)
	g.Expect(err).NotTo(HaveOccurred(), "restoring the annotation makes the pool usable again")

	l.OnDeleted(record(claimID("a", "uid-a"), "10.0.0.10"))
	pool.Annotations = map[string]string{v1alpha1.AllowOverlapAnnotation: "true"}
	_, err = l.For(context.Background(), pool)
	g.Expect(err).NotTo(HaveOccurred(), "without records the annotation may change")
}
