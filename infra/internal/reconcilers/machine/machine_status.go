package machine

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	provisioning *progress
	// node is the provisioned node.
	node *backend.Node
	// addresses is how the claims of IP addresses stand
	// (IPAddressesClaimed); nil also for a machine that names no pool.
	addresses *addressclaims.Progress
	// bootstrap is how the bootstrap stands (BootstrapExecSucceeded).
	bootstrap *bootstrap.Progress
	// workloadNode is how the Node in the workload cluster stands
	// (WorkloadNodeProviderIDSet).
	workloadNode *progress
}

// progress is how one step stands: done, or the reason and message why not.
type progress struct {
	done            bool
	reason, message string
}

func notDone(reason, message string) *progress { return &progress{reason: reason, message: message} }

// UpdateStatus derives the machine's status fields and conditions from
// what the phases found, then summarises the conditions into Ready. It is
// the only place that sets them.
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

func setBackendMachineProvisionedCondition(mm *v1alpha1.MonolithMachine, p *progress) {
	if p == nil {
		return
	}
	setProgress(mm, v1alpha1.BackendMachineProvisionedCondition, p.done, v1alpha1.ProvisionedReason, p.reason, p.message)
}

func setIPAddressesClaimedCondition(mm *v1alpha1.MonolithMachine, p *addressclaims.Progress) {
	if p == nil {
		return
	}
	setProgress(mm, v1alpha1.IPAddressesClaimedCondition, p.Claimed, v1alpha1.ClaimedReason, p.Reason, p.Message)
}

func setBootstrapExecSucceededCondition(mm *v1alpha1.MonolithMachine, p *bootstrap.Progress) {
	if p == nil {
		return
	}
	setProgress(mm, v1alpha1.BootstrapExecSucceededCondition, p.Succeeded, v1alpha1.SucceededReason, p.Reason, p.Message)
}

func setWorkloadNodeProviderIDSetCondition(mm *v1alpha1.MonolithMachine, p *progress) {
	if p == nil {
		return
	}
	setProgress(mm, v1alpha1.WorkloadNodeProviderIDSetCondition, p.done, v1alpha1.SetReason, p.reason, p.message)
}

// setProgress sets condition t True with doneReason when done, else False
// with reason and message.
func setProgress(mm *v1alpha1.MonolithMachine, t string, done bool, doneReason, reason, message string) {
	c := metav1.Condition{Type: t, Status: metav1.ConditionFalse, Reason: reason, Message: message, ObservedGeneration: mm.Generation}
	if done {
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, doneReason, ""
	}
	conditions.Set(mm, c)
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
