package pool

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/capi-monolith/capi-monolith/contracts/scaffold"
	"github.com/capi-monolith/capi-monolith/ipam/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/ipam/internal/allocator"
)

// scope is what one reconcile of one pool knows.
type scope[T Object] = scaffold.ScopeWith[T, results]

// results are what the phases of one reconcile found. All zero: the phases
// did not get that far (a failed read, a deletion free to go), and what an
// earlier reconcile recorded stays.
type results struct {
	// invalidSpec is why the pool's spec cannot be served (only reachable
	// with the webhook off).
	invalidSpec error
	// counts are the pool's address counts, as its ledger holds them.
	counts *allocator.Int64Counts
	// blockingDeletion is how many allocated addresses hold the pool's
	// deletion.
	blockingDeletion int
}

// UpdateStatus implements scaffold.PhasesWith: the one place the pool's
// status.ipAddresses and Ready condition are set, from what the phases
// found.
func (r *Reconciler[T]) UpdateStatus(_ context.Context, s *scope[T]) {
	setIPAddresses(s.Object, s.Results)
	setReadyCondition(s.Object, s.Results)
}

// setIPAddresses reports the counts; an invalid pool hands out nothing and
// reports none.
func setIPAddresses(pool v1alpha1.Pool, res results) {
	switch {
	case res.invalidSpec != nil:
		pool.GetStatus().IPAddresses = nil
	case res.counts != nil:
		c := res.counts
		pool.GetStatus().IPAddresses = &v1alpha1.IPAddressesStatus{
			Total: c.Total, Used: c.Used, Free: c.Free, OutOfRange: int64(c.OutOfRange), Capped: c.Capped,
		}
	}
}

// setReadyCondition sets Ready: False with why the spec is invalid or what
// holds the deletion, True once the pool is counted.
func setReadyCondition(pool v1alpha1.Pool, res results) {
	switch {
	case res.invalidSpec != nil:
		setReady(pool, metav1.ConditionFalse, v1alpha1.InvalidSpecReason, res.invalidSpec.Error())
	case res.blockingDeletion > 0:
		setReady(pool, metav1.ConditionFalse, v1alpha1.DeletionBlockedReason,
			fmt.Sprintf("Deletion waits for %d allocated addresses to be released (or annotate the pool with %s=true)", res.blockingDeletion, v1alpha1.SkipDeleteProtectionAnnotation))
	case res.counts != nil:
		setReady(pool, metav1.ConditionTrue, v1alpha1.ReadyReason, "")
	}
}

func setReady(pool v1alpha1.Pool, status metav1.ConditionStatus, reason, message string) {
	conditions.Set(pool, metav1.Condition{
		Type: v1alpha1.ReadyCondition, Status: status, Reason: reason, Message: message,
		ObservedGeneration: pool.GetGeneration(),
	})
}
