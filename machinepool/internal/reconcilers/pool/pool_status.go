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
		if mm.Spec.ProviderID != "" {
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

// setInstancesSummary sets InstancesReady: how far the pool is from
// desired up-to-date, ready instances.
func setInstancesSummary(pool *v1alpha1.MonolithMachinePool, obs *observation, members []member, desired int) {
	status, reason, message := summarise(obs, members, desired)
	setInstancesReady(pool, status, reason, message)
}

func summarise(obs *observation, members []member, desired int) (metav1.ConditionStatus, string, string) {
	outdated, ready := 0, 0
	for _, m := range members {
		if m.outdated {
			outdated++
		}
		if m.ready {
			ready++
		}
	}
	going := len(obs.instances) - len(members)
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

// UpdateStatus summarises the pool's conditions into Ready.
func (r *Reconciler) UpdateStatus(ctx context.Context, s *scaffold.Scope[*v1alpha1.MonolithMachinePool]) {
	if err := conditions.SetSummaryCondition(s.Object, s.Object, clusterv1.ReadyCondition,
		conditions.ForConditionTypes{v1alpha1.InstancesReadyCondition}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Failed to summarise the Ready condition")
	}
}
