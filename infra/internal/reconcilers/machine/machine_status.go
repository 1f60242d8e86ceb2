package machine

import (
	"context"

	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/capi-monolith/capi-monolith/contracts/scaffold"
	"github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/infra/internal/addressclaims"
	"github.com/capi-monolith/capi-monolith/infra/internal/backend"
	"github.com/capi-monolith/capi-monolith/infra/internal/bootstrap"
)

// scope is what one reconcile of one MonolithMachine knows.
type scope = scaffold.ScopeWith[*v1alpha1.MonolithMachine, results]

// results are what the phases of one reconcile found. A nil field: the
// phases did not get that far, and what an earlier reconcile recorded stays.
type results struct {
	// provisioning is how the backend's node stands
	// (BackendMachineProvisioned).
	provisioning *scaffold.Progress
	// node is the provisioned node.
	node *backend.Node
	// addresses is how the claims of IP addresses stand
	// (IPAddressesClaimed); nil also for a machine that names no pool.
	addresses *addressclaims.Progress
	// bootstrap is how the bootstrap stands (BootstrapExecSucceeded, with
	// status.bootstrap, which the phases set once it succeeded).
	bootstrap *bootstrap.Progress
	// workloadNode is how the Node in the workload cluster stands
	// (WorkloadNodeProviderIDSet, with status.workloadNode, which the
	// phases set as they go).
	workloadNode *scaffold.Progress
}

// UpdateStatus derives the machine's status fields and conditions from
// what the phases found, then summarises the conditions into Ready. It is
// the only place that sets them, but for status.bootstrap and
// status.workloadNode: the phases set those, as the record later
// reconciles read back.
func (r *Reconciler) UpdateStatus(ctx context.Context, s *scope) {
	mm, res := s.Object, s.Results
	setNodeStatus(mm, res.node)
	setBackendMachineProvisionedCondition(mm, res.provisioning)
	setIPAddressesClaimedCondition(mm, res.addresses)
	setBootstrapExecSucceededCondition(mm, res.bootstrap)
	setWorkloadNodeProviderIDSetCondition(mm, res.workloadNode)
	if err := setReady(mm); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Failed to summarise the Ready condition")
	}
}

// setNodeStatus reports a provisioned node: its addresses, failure domain
// and the provisioned flag Cluster API waits for.
func setNodeStatus(mm *v1alpha1.MonolithMachine, node *backend.Node) {
	if node == nil {
		return
	}
	mm.Status.Addresses = node.Addresses
	mm.Status.FailureDomain = node.FailureDomain
	mm.Status.Initialization.Provisioned = ptr.To(true)
}

func setBackendMachineProvisionedCondition(mm *v1alpha1.MonolithMachine, p *scaffold.Progress) {
	scaffold.SetProgressCondition(mm, v1alpha1.BackendMachineProvisionedCondition, v1alpha1.ProvisionedReason, p)
}

func setIPAddressesClaimedCondition(mm *v1alpha1.MonolithMachine, p *addressclaims.Progress) {
	if p == nil {
		return
	}
	scaffold.SetProgressCondition(mm, v1alpha1.IPAddressesClaimedCondition, v1alpha1.ClaimedReason,
		&scaffold.Progress{Done: p.Claimed, Reason: p.Reason, Message: p.Message})
}

// setBootstrapExecSucceededCondition sets BootstrapExecSucceeded: True once
// status.bootstrap.succeeded says so, else how this reconcile found the
// run.
func setBootstrapExecSucceededCondition(mm *v1alpha1.MonolithMachine, p *bootstrap.Progress) {
	if ptr.Deref(mm.Status.Bootstrap.Succeeded, false) {
		p = &bootstrap.Progress{Succeeded: true}
	}
	if p == nil {
		return
	}
	scaffold.SetProgressCondition(mm, v1alpha1.BootstrapExecSucceededCondition, v1alpha1.SucceededReason,
		&scaffold.Progress{Done: p.Succeeded, Reason: p.Reason, Message: p.Message})
}

// setWorkloadNodeProviderIDSetCondition sets WorkloadNodeProviderIDSet:
// True once status.workloadNode.providerIDSet says so, else how this
// reconcile found the Node.
func setWorkloadNodeProviderIDSetCondition(mm *v1alpha1.MonolithMachine, p *scaffold.Progress) {
	if ptr.Deref(mm.Status.WorkloadNode.ProviderIDSet, false) {
		p = &scaffold.Progress{Done: true}
	}
	scaffold.SetProgressCondition(mm, v1alpha1.WorkloadNodeProviderIDSetCondition, v1alpha1.SetReason, p)
}

// setReady sets Ready from the address, provisioning and bootstrap
// conditions, in the order the steps run, so that Ready's reason is the
// first step's that stands in the way (ReasonOfTheFirstIssue): an IP pool
// that cannot serve the machine makes it PoolExhausted, not the
// WaitingForIPAddresses of the provisioning that waits for it. Cluster API
// core mirrors Ready onto the Machine's InfrastructureReady. A machine that
// names no pool never gets IPAddressesClaimed, and bootstrap only starts
// once the node exists: both are ignored while missing.
// WorkloadNodeProviderIDSet is not summarised: a workload cluster that is
// not up yet must not make the infrastructure unready.
func setReady(mm *v1alpha1.MonolithMachine) error {
	return conditions.SetSummaryCondition(mm, mm, clusterv1.ReadyCondition,
		conditions.ForConditionTypes{v1alpha1.IPAddressesClaimedCondition, v1alpha1.BackendMachineProvisionedCondition, v1alpha1.BootstrapExecSucceededCondition},
		conditions.IgnoreTypesIfMissing{v1alpha1.BootstrapExecSucceededCondition, v1alpha1.IPAddressesClaimedCondition},
		scaffold.ReasonOfTheFirstIssue,
	)
}
