package claim

import (
	"context"
	"net/netip"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/capi-monolith/capi-monolith/ipam/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/ipam/internal/index"
	"github.com/capi-monolith/capi-monolith/ipam/internal/ledger"
	"github.com/capi-monolith/capi-monolith/ipam/internal/records"
)

// fixture is a claim reconciler over a fake client whose record creates go
// through onCreate.
func fixture(t *testing.T, onCreate func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error) (*Reconciler, client.Client, *v1alpha1.MonolithIPPool) {
	t.Helper()
	g := NewWithT(t)
	scheme := runtime.NewScheme()
	g.Expect(v1alpha1.AddToScheme(scheme)).To(Succeed())
	g.Expect(ipamv1.AddToScheme(scheme)).To(Succeed())
	pool := &v1alpha1.MonolithIPPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pool"},
		Spec:       v1alpha1.IPPoolSpec{Addresses: []string{"10.0.0.10-10.0.0.11"}, Prefix: 24},
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(pool).
		WithIndex(&v1alpha1.MonolithIPAllocation{}, index.AllocationPoolField, func(o client.Object) []string {
			return []string{index.KeyOfAllocation(o.(*v1alpha1.MonolithIPAllocation)).String()}
		}).
		WithIndex(&v1alpha1.MonolithIPAllocation{}, index.AllocationClaimField, func(o client.Object) []string {
			r := o.(*v1alpha1.MonolithIPAllocation)
			return []string{index.ClaimKey(r.Spec.ClaimRef.Namespace, r.Spec.ClaimRef.Name)}
		}).
		WithIndex(&ipamv1.IPAddress{}, index.IPAddressPoolField, func(o client.Object) []string {
			a := o.(*ipamv1.IPAddress)
			if k, ok := index.KeyOfRef(a.Spec.PoolRef, a.Namespace); ok {
				return []string{k.String()}
			}
			return nil
		}).
		WithInterceptorFuncs(interceptor.Funcs{Create: onCreate}).Build()
	return &Reconciler{Client: c, APIReader: c, Ledger: ledger.New(c)}, c, pool
}

func newTestClaim(name, uid string) *ipamv1.IPAddressClaim {
	return &ipamv1.IPAddressClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(uid)},
		Spec: ipamv1.IPAddressClaimSpec{PoolRef: ipamv1.IPPoolReference{
			APIGroup: v1alpha1.GroupVersion.Group, Kind: v1alpha1.MonolithIPPoolKind, Name: "pool",
		}},
	}
}

func TestARecordCreateThatTimedOutButCommittedIsKept(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	r, c, pool := fixture(t, func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
		if err := c.Create(ctx, obj, opts...); err != nil {
			return err
		}
		if _, ok := obj.(*v1alpha1.MonolithIPAllocation); ok {
			// Committed, but the answer never reached us.
			return apierrors.NewTimeoutError("request did not complete within the allowed duration", 1)
		}
		return nil
	})
	a := newTestClaim("a", "uid-a")
	_, err := r.ReconcileNormal(ctx, &scope{Object: a})
	g.Expect(err).NotTo(HaveOccurred())
	address := &ipamv1.IPAddress{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "a"}, address)).To(Succeed(), "the committed record is used")
	g.Expect(address.Spec.Address).To(Equal("10.0.0.10"))

	state, err := r.Ledger.For(ctx, pool)
	g.Expect(err).NotTo(HaveOccurred())
	held, ok := state.AddressOf(records.Claim{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "a"}, UID: "uid-a"})
	g.Expect(ok).To(BeTrue(), "the ledger kept the hold")
	g.Expect(held).To(Equal(netip.MustParseAddr("10.0.0.10")))

	b := newTestClaim("b", "uid-b")
	_, err = r.ReconcileNormal(ctx, &scope{Object: b})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "b"}, address)).To(Succeed())
	g.Expect(address.Spec.Address).To(Equal("10.0.0.11"), "never the committed address again")
}

func TestARecordCreateThatFailedUnseenKeepsTheHoldAndRetries(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	fail := true
	r, c, _ := fixture(t, func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
		if _, ok := obj.(*v1alpha1.MonolithIPAllocation); ok && fail {
			return apierrors.NewServiceUnavailable("etcd is away")
		}
		return c.Create(ctx, obj, opts...)
	})
	a := newTestClaim("a", "uid-a")
	_, err := r.ReconcileNormal(ctx, &scope{Object: a})
	g.Expect(err).To(HaveOccurred(), "retried with backoff")
	fail = false
	_, err = r.ReconcileNormal(ctx, &scope{Object: a})
	g.Expect(err).NotTo(HaveOccurred())
	address := &ipamv1.IPAddress{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "a"}, address)).To(Succeed())
	g.Expect(address.Spec.Address).To(Equal("10.0.0.10"), "the same address, held across the failure")
}

func TestAnAddressRecordedByAnotherManagerIsSkipped(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	r, c, _ := fixture(t, nil)
	// Another manager's record, which this ledger has not seen.
	theirs := newRecord("v4-10.0.0.10", newTestClaim("other", "uid-o"), index.PoolKey{Kind: v1alpha1.MonolithIPPoolKind, Namespace: "ns", Name: "pool"}, netip.MustParseAddr("10.0.0.10"), 24, "")
	_, _ = r.Ledger.For(ctx, &v1alpha1.MonolithIPPool{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pool"}, Spec: v1alpha1.IPPoolSpec{Addresses: []string{"10.0.0.10-10.0.0.11"}, Prefix: 24}})
	g.Expect(c.Create(ctx, theirs)).To(Succeed())
	a := newTestClaim("a", "uid-a")
	_, err := r.ReconcileNormal(ctx, &scope{Object: a})
	g.Expect(err).NotTo(HaveOccurred())
	address := &ipamv1.IPAddress{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "a"}, address)).To(Succeed())
	g.Expect(address.Spec.Address).To(Equal("10.0.0.11"))
}

func TestReleaseWaitsOnlyForFinalizersOfOthers(t *testing.T) {
	tests := []struct {
		name       string
		finalizers []string
		want       []string
	}{
		{"ours alone: release now", []string{v1alpha1.ReleaseAddressFinalizer}, nil},
		{"the garbage collector's foreground deletion waits on us: release now", []string{metav1.FinalizerDeleteDependents, v1alpha1.ReleaseAddressFinalizer}, nil},
		{"the infra module's: wait", []string{"infrastructure.cluster.x-k8s.io/claim", v1alpha1.ReleaseAddressFinalizer}, []string{"infrastructure.cluster.x-k8s.io/claim"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newTestClaim("a", "uid-a")
			c.Finalizers = tt.finalizers
			NewWithT(t).Expect(otherFinalizers(c)).To(Equal(tt.want))
		})
	}
}
