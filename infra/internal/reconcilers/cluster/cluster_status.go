package cluster

import (
	"context"

	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/capi-monolith/capi-monolith/contracts/scaffold"
	"github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
)

// scope is what one reconcile of one MonolithCluster knows.
type scope = scaffold.ScopeWith[*v1alpha1.MonolithCluster, results]

// results are what the phases of one reconcile found. A nil or false
// field: the phases did not get that far, and what an earlier reconcile
// recorded stays.
type results struct {
	// provisioned is true once the backend provisioned the cluster's
	// infrastructure.
	provisioned bool
	// loadBalancer is how the control plane load balancer stands
	// (LoadBalancerAvailable).
	loadBalancer *scaffold.Progress
}

// UpdateStatus derives the cluster's status fields and conditions from what
// the phases found, then summarises the conditions into Ready. It is the
// only place that sets them.
func (r *Reconciler) UpdateStatus(ctx context.Context, s *scope) {
	mc := s.Object
	setProvisioned(mc, s.Results.provisioned)
	setLoadBalancerAvailableCondition(mc, s.Results.loadBalancer)
	if err := setReady(mc); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Failed to summarise the Ready condition")
	}
}

// setProvisioned reports provisioned infrastructure: the failure domains the
// spec offers, and the provisioned flag Cluster API waits for.
func setProvisioned(mc *v1alpha1.MonolithCluster, provisioned bool) {
	if !provisioned {
		return
	}
	mc.Status.FailureDomains = mc.Spec.FailureDomains
	mc.Status.Initialization.Provisioned = ptr.To(true)
}

func setLoadBalancerAvailableCondition(mc *v1alpha1.MonolithCluster, p *scaffold.Progress) {
	scaffold.SetProgressCondition(mc, v1alpha1.LoadBalancerAvailableCondition, v1alpha1.ProvisionedReason, p)
}

// setReady summarises the backend's conditions into Ready, with the reason
// of the one that stands in the way: Cluster API core mirrors Ready onto
// the Cluster's InfrastructureReady.
func setReady(mc *v1alpha1.MonolithCluster) error {
	return conditions.SetSummaryCondition(mc, mc, clusterv1.ReadyCondition,
		conditions.ForConditionTypes{v1alpha1.LoadBalancerAvailableCondition}, scaffold.ReasonOfTheFirstIssue)
}
