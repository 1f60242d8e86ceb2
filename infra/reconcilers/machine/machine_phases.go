package machine

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/capi-monolith/capi-monolith/contracts/reconcile"
	"github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/infra/backend"
	"github.com/capi-monolith/capi-monolith/infra/bootstrap"
)

const (
	// provisioningRecheck is how often a node still being created is
	// looked at again.
	provisioningRecheck = 2 * time.Second
)

// ReconcileNormal drives the machine to a provisioned, bootstrapped node.
func (r *Reconciler) ReconcileNormal(ctx context.Context, s *reconcile.Scope[*v1alpha1.MonolithMachine]) (ctrl.Result, error) {
	mm := s.Object
	machine, err := util.GetOwnerMachine(ctx, r.Client, mm.ObjectMeta)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("failed to get the owner Machine: %w", err)
	}
	if machine == nil {
		ctrl.LoggerFrom(ctx).Info("Waiting for the owning Machine")
		return ctrl.Result{}, nil
	}
	if !ptr.Deref(s.Cluster.Status.Initialization.InfrastructureProvisioned, false) {
		setCondition(mm, v1alpha1.BackendMachineProvisionedCondition, metav1.ConditionFalse, v1alpha1.WaitingForClusterInfrastructureReason, "")
		return ctrl.Result{}, nil
	}
	if machine.Spec.Bootstrap.DataSecretName == nil {
		setCondition(mm, v1alpha1.BackendMachineProvisionedCondition, metav1.ConditionFalse, v1alpha1.WaitingForBootstrapDataReason, "")
		return ctrl.Result{}, nil
	}
	mc, err := r.monolithCluster(ctx, s.Cluster)
	if err != nil || mc == nil {
		return ctrl.Result{}, err
	}
	b, err := r.Backends.ForMachine(mm.Spec.Backend)
	if err != nil {
		setCondition(mm, v1alpha1.BackendMachineProvisionedCondition, metav1.ConditionFalse, v1alpha1.FailedReason, err.Error())
		return ctrl.Result{}, err
	}

	static, ready, err := r.reconcileClaims(ctx, mm, s.Cluster)
	if err != nil || !ready {
		return ctrl.Result{}, err
	}

	ref := machineRef(mm)
	node, err := b.EnsureNode(ctx, backend.NodeSpec{
		Machine:         ref,
		Cluster:         mc.Spec.Backend,
		Backend:         mm.Spec.Backend,
		ControlPlane:    util.IsControlPlaneMachine(machine),
		Version:         machine.Spec.Version,
		FailureDomain:   mm.Spec.FailureDomain,
		StaticAddresses: static,
	})
	if err != nil {
		setCondition(mm, v1alpha1.BackendMachineProvisionedCondition, metav1.ConditionFalse, v1alpha1.FailedReason, err.Error())
		return ctrl.Result{}, fmt.Errorf("failed to provision the node: %w", err)
	}
	if !node.Provisioned {
		setCondition(mm, v1alpha1.BackendMachineProvisionedCondition, metav1.ConditionFalse, v1alpha1.RunningReason, "Waiting for the node to be created")
		return ctrl.Result{RequeueAfter: provisioningRecheck}, nil
	}
	// Reported as soon as the node exists, as for a real VM: bootstrap
	// follows, and Cluster API waits for the Node for the rest.
	mm.Spec.ProviderID = node.ProviderID
	mm.Status.Addresses = node.Addresses
	mm.Status.Initialization.Provisioned = ptr.To(true)
	setCondition(mm, v1alpha1.BackendMachineProvisionedCondition, metav1.ConditionTrue, v1alpha1.ProvisionedReason, "")

	res, err := bootstrap.Reconcile(ctx, mm, bootstrap.Options{
		Client: r.Client, Tasks: r.Tasks, Backend: b, Node: ref, SecretName: *machine.Spec.Bootstrap.DataSecretName,
	})
	if err != nil || !conditions.IsTrue(mm, v1alpha1.BootstrapExecSucceededCondition) {
		return res, err
	}
	return r.reconcileWorkloadNode(ctx, mm, s.Cluster)
}

func (r *Reconciler) monolithCluster(ctx context.Context, cluster *clusterv1.Cluster) (*v1alpha1.MonolithCluster, error) {
	ref := cluster.Spec.InfrastructureRef
	if ref.Kind != "MonolithCluster" || ref.APIGroup != v1alpha1.GroupVersion.Group {
		return nil, fmt.Errorf("cluster %s has infrastructure %s %s, not a MonolithCluster", cluster.Name, ref.APIGroup, ref.Kind)
	}
	mc := &v1alpha1.MonolithCluster{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: ref.Name}, mc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("failed to get MonolithCluster %s: %w", ref.Name, err)
	}
	return mc, nil
}

// ReconcileDelete cancels the bootstrap, deletes the node and releases the
// machine's addresses.
func (r *Reconciler) ReconcileDelete(ctx context.Context, s *reconcile.Scope[*v1alpha1.MonolithMachine]) (ctrl.Result, error) {
	mm := s.Object
	setCondition(mm, v1alpha1.BackendMachineProvisionedCondition, metav1.ConditionFalse, v1alpha1.DeletingReason, "")
	r.Tasks.Forget(string(mm.UID))
	b, err := r.Backends.ForMachine(mm.Spec.Backend)
	if err != nil {
		return ctrl.Result{}, err
	}
	ctrl.LoggerFrom(ctx).Info("Deleting the node")
	if err := b.DeleteNode(ctx, machineRef(mm)); err != nil {
		return ctrl.Result{}, fmt.Errorf("failed to delete the node: %w", err)
	}
	// Only once the node is gone may its addresses go back to the pools.
	return ctrl.Result{}, r.releaseClaims(ctx, mm)
}

// UpdateStatus summarises the machine's conditions into Ready.
func (r *Reconciler) UpdateStatus(ctx context.Context, s *reconcile.Scope[*v1alpha1.MonolithMachine]) {
	if err := conditions.SetSummaryCondition(s.Object, s.Object, clusterv1.ReadyCondition,
		conditions.ForConditionTypes{v1alpha1.BackendMachineProvisionedCondition, v1alpha1.BootstrapExecSucceededCondition, v1alpha1.IPAddressesClaimedCondition},
		conditions.IgnoreTypesIfMissing{v1alpha1.BootstrapExecSucceededCondition, v1alpha1.IPAddressesClaimedCondition},
	); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Failed to summarise the Ready condition")
	}
}

func machineRef(mm *v1alpha1.MonolithMachine) backend.MachineRef {
	return backend.MachineRef{
		Cluster: backend.ClusterRef{Namespace: mm.Namespace, Name: mm.Labels[clusterv1.ClusterNameLabel]},
		Name:    mm.Name,
	}
}

func setCondition(mm *v1alpha1.MonolithMachine, t string, status metav1.ConditionStatus, reason, message string) {
	conditions.Set(mm, metav1.Condition{Type: t, Status: status, Reason: reason, Message: message, ObservedGeneration: mm.Generation})
}
