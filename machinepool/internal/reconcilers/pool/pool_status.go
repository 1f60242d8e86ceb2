package pool

import (
	"context"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/capi-monolith/capi-monolith/contracts/scaffold"
	"github.com/capi-monolith/capi-monolith/machinepool/api/v1alpha1"
)

// scope is what one reconcile of one MonolithMachinePool knows.
type scope = scaffold.ScopeWith[*v1alpha1.MonolithMachinePool, results]

// results are what the phases of one reconcile found. A nil or zero field:
// the phases did not get that far, and what an earlier reconcile recorded
// stays.
type results struct {
	// reconciledNormal is true when the normal phase ran: the pool then
	// reports the kind of its instances.
	reconciledNormal bool
	// observed are the pool's instances, reported with desired, the
	// number of instances the MachinePool asks for (0 while deleting).
	observed *observation
	desired  int
	// notReady says why the instances cannot be ready (InstancesReady);
	// else summary, when set, says how far the pool is from desired.
	notReady *notReady
	summary  *summary
}

// summary is what InstancesReady summarises, as the normal phase found it
// before it created or removed any instance.
type summary struct {
	// instances is the number of instances, those going away included.
	instances int
	// members are the instances that stay.
	members []member
	desired int
}

// notReady is why a pool's instances cannot be ready.
type notReady struct {
	reason, message string
}

// UpdateStatus derives the pool's status fields and conditions from what
// the phases found, then summarises the conditions into Ready. It is the
// only place that sets them (but for status.failureReason and
// status.failureMessage, set by the normal phase).
func (r *Reconciler) UpdateStatus(ctx context.Context, s *scope) {
	pool, res := s.Object, s.Results
	if res.reconciledNormal {
		pool.Status.InfrastructureMachineKind = v1alpha1.InfrastructureMachineKind
	}
	if res.observed != nil {
		reportInstances(pool, res.observed, res.desired)
	}
	setInstancesReadyCondition(pool, res)
	if err := setReady(pool); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Failed to summarise the Ready condition")
	}
}

// reportInstances sets what the contract asks of the pool: the sorted
// provider IDs of the instances that exist, their number, each instance,
// and, once they first match desired, ready and
// initialization.provisioned (which then stay true).
func reportInstances(pool *v1alpha1.MonolithMachinePool, obs *observation, desired int) {
	ids := []string{}
	instances := make([]v1alpha1.InstanceStatus, 0, len(obs.instances))
	for i := range obs.instances {
		mm := &obs.instances[i]
		st := v1alpha1.InstanceStatus{InstanceName: mm.Name, Addresses: mm.Status.Addresses, Ready: instanceReady(mm)}
		// The provider ID is in spec before the node exists (with the
		// finalizer, for a backend that knows it in advance): listed once
		// the node is provisioned.
		if mm.Spec.ProviderID != "" && ptr.Deref(mm.Status.Initialization.Provisioned, false) {
			st.ProviderID = ptr.To(mm.Spec.ProviderID)
			ids = append(ids, mm.Spec.ProviderID)
		}
		if v := mm.Annotations[v1alpha1.VersionAnnotation]; v != "" {
			st.Version = ptr.To(v)
		}
		instances = append(instances, st)
	}
	slices.Sort(ids)
	pool.Spec.ProviderIDList = ids
	pool.Status.Replicas = int32(len(ids))
	pool.Status.Instances = instances
	if !pool.DeletionTimestamp.IsZero() {
		return
	}
	if len(ids) == desired && len(obs.instances) == desired {
		pool.Status.Ready = true
	}
	if pool.Status.Ready {
		pool.Status.Initialization.Provisioned = ptr.To(true)
	}
}

// setInstancesReadyCondition sets InstancesReady: why the instances cannot
// be ready, or how far the pool is from desired up-to-date, ready
// instances.
func setInstancesReadyCondition(pool *v1alpha1.MonolithMachinePool, res results) {
	switch {
	case res.notReady != nil:
		setInstancesReady(pool, metav1.ConditionFalse, res.notReady.reason, res.notReady.message)
	case res.summary != nil:
		status, reason, message := summarise(*res.summary)
		setInstancesReady(pool, status, reason, message)
	}
}

func summarise(sum summary) (metav1.ConditionStatus, string, string) {
	members, desired := sum.members, sum.desired
	outdated, ready := 0, 0
	for _, m := range members {
		if m.outdated {
			outdated++
		}
		if m.ready {
			ready++
		}
	}
	going := sum.instances - len(members)
	switch {
	case outdated > 0:
		return metav1.ConditionFalse, v1alpha1.RollingOutReason, fmt.Sprintf("%d of %d instances outdated", outdated, len(members))
	case len(members) < desired:
		return metav1.ConditionFalse, v1alpha1.ScalingUpReason, fmt.Sprintf("%d of %d instances", len(members), desired)
	case len(members) > desired || going > 0:
		return metav1.ConditionFalse, v1alpha1.ScalingDownReason, fmt.Sprintf("%d instances, %d desired, %d being deleted", len(members), desired, going)
	case ready < desired:
		return metav1.ConditionFalse, v1alpha1.WaitingForInstancesReason, fmt.Sprintf("%d of %d instances ready", ready, desired)
	}
	return metav1.ConditionTrue, v1alpha1.InstancesReadyReason, ""
}

func setInstancesReady(pool *v1alpha1.MonolithMachinePool, status metav1.ConditionStatus, reason, message string) {
	conditions.Set(pool, metav1.Condition{Type: v1alpha1.InstancesReadyCondition, Status: status, Reason: reason,
		Message: message, ObservedGeneration: pool.Generation})
}

// setReady summarises the pool's conditions into Ready, with the reason of
// the one that stands in the way (InvalidConfiguration for a terminal
// failure): Cluster API core mirrors Ready onto the MachinePool.
func setReady(pool *v1alpha1.MonolithMachinePool) error {
	return conditions.SetSummaryCondition(pool, pool, clusterv1.ReadyCondition,
		conditions.ForConditionTypes{v1alpha1.InstancesReadyCondition}, scaffold.ReasonOfTheFirstIssue)
}
