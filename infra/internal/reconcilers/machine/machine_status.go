package machine

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/capi-monolith/capi-monolith/contracts/scaffold"
	"github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
)

// UpdateStatus summarises the machine's conditions into Ready. The phases
// record facts in their own conditions; Ready is set here only.
func (r *Reconciler) UpdateStatus(ctx context.Context, s *scaffold.Scope[*v1alpha1.MonolithMachine]) {
	if err := setReady(s.Object); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Failed to summarise the Ready condition")
	}
}

// setReady sets Ready from the provisioning, bootstrap and address
// conditions. A machine that names no pool never gets IPAddressesClaimed,
// and bootstrap only starts once the node exists: both are ignored while
// missing. WorkloadNodeProviderIDSet is not summarised: a workload cluster
// that is not up yet must not make the infrastructure unready.
func setReady(mm *v1alpha1.MonolithMachine) error {
	return conditions.SetSummaryCondition(mm, mm, clusterv1.ReadyCondition,
		conditions.ForConditionTypes{v1alpha1.BackendMachineProvisionedCondition, v1alpha1.BootstrapExecSucceededCondition, v1alpha1.IPAddressesClaimedCondition},
		conditions.IgnoreTypesIfMissing{v1alpha1.BootstrapExecSucceededCondition, v1alpha1.IPAddressesClaimedCondition},
	)
}
