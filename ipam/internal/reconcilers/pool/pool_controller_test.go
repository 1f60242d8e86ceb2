package pool

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/capi-monolith/capi-monolith/ipam/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/ipam/internal/index"
	"github.com/capi-monolith/capi-monolith/ipam/internal/ledger"
)

// A record created a moment before the pool's deletion is reconciled may
// not be in the cache yet: the deletion waits for it all the same.
func TestPoolDeletionCountsRecordsThatTheCacheHasNotSeen(t *testing.T) {
	g := NewWithT(t)
	scheme := runtime.NewScheme()
	g.Expect(v1alpha1.AddToScheme(scheme)).To(Succeed())
	pool := &v1alpha1.MonolithIPPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pool"},
		Spec:       v1alpha1.IPPoolSpec{Addresses: []string{"10.0.0.10-10.0.0.11"}, Prefix: 24},
	}
	rec := &v1alpha1.MonolithIPAllocation{
		ObjectMeta: metav1.ObjectMeta{Name: "v4-10.0.0.10"},
		Spec: v1alpha1.MonolithIPAllocationSpec{
			Address: "10.0.0.10", Prefix: 24,
			PoolRef:  v1alpha1.AllocationPoolReference{Kind: v1alpha1.MonolithIPPoolKind, Namespace: "ns", Name: "pool"},
			ClaimRef: v1alpha1.AllocationClaimReference{Namespace: "ns", Name: "claim", UID: "uid"},
		},
	}
	withIndex := func(b *fake.ClientBuilder) *fake.ClientBuilder {
		return b.WithScheme(scheme).WithIndex(&v1alpha1.MonolithIPAllocation{}, index.AllocationPoolField, func(o client.Object) []string {
			return []string{index.KeyOfAllocation(o.(*v1alpha1.MonolithIPAllocation)).String()}
		})
	}
	cache := withIndex(fake.NewClientBuilder()).WithObjects(pool).Build()
	apiserver := withIndex(fake.NewClientBuilder()).WithObjects(pool, rec).Build()
	r := &Reconciler[*v1alpha1.MonolithIPPool]{
		Client: cache, APIReader: apiserver, Ledger: ledger.New(cache), Kind: v1alpha1.MonolithIPPoolKind,
		NewObject: func() *v1alpha1.MonolithIPPool { return &v1alpha1.MonolithIPPool{} },
	}
	s := &scope[*v1alpha1.MonolithIPPool]{Object: pool}
	res, err := r.ReconcileDelete(t.Context(), s)
	g.Expect(err).NotTo(HaveOccurred())
	r.UpdateStatus(t.Context(), s)
	g.Expect(res.RequeueAfter).To(BeNumerically(">", 0), "the deletion waits")
	cond := conditions.Get(pool, v1alpha1.ReadyCondition)
	g.Expect(cond).NotTo(BeNil())
	g.Expect(cond.Reason).To(Equal(v1alpha1.DeletionBlockedReason))
	g.Expect(cond.Message).To(ContainSubstring("1 allocated addresses"))
	g.Expect(apiserver.Get(t.Context(), client.ObjectKeyFromObject(rec), &v1alpha1.MonolithIPAllocation{})).To(Succeed(), "the record stays")
}
