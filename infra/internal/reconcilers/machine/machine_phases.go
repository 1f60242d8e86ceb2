package machine

import (
	"context"
	"fmt"
	"time"

	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/capi-monolith/capi-monolith/contracts/scaffold"
	"github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/infra/internal/backend"
	"github.com/capi-monolith/capi-monolith/infra/internal/bootstrap"
	"github.com/capi-monolith/capi-monolith/infra/internal/clusters"
)

const (
	// provisioningRecheck is how often a node still being created is
	// looked at again.
	provisioningRecheck = 2 * time.Second
)

// ownerNotHandledReason says that no enabled module answers for the kind of
// the machine's owner (a pool instance while the machinepool module is off).
const ownerNotHandledReason = "OwnerNotHandled"

// ReconcileNormal drives the machine to a provisioned, bootstrapped node.
// It records what it finds in s.Results; UpdateStatus derives the
// conditions and status fields from them.
func (r *Reconciler) ReconcileNormal(ctx context.Context, s *scope) (ctrl.Result, error) {
	mm, res := s.Object, &s.Results
	r.removeLegacyFinalizers(mm)
	adoptLegacyConditions(mm)
	owner := r.owners.of(mm)
	if owner == nil {
		res.provisioning = scaffold.NotDone(ownerNotHandledReason,
			"No enabled module handles the owner of this machine (a MachinePool instance needs the machinepool module)")
		return ctrl.Result{}, nil
	}
	facts, err := owner.Get(ctx, mm)
	if err != nil {
		return ctrl.Result{}, err
	}
	if !facts.Found {
		ctrl.LoggerFrom(ctx).Info("Waiting for the owning " + owner.Kind())
		if facts.WaitingReason != "" {
			res.provisioning = scaffold.NotDone(facts.WaitingReason, "")
		}
		return ctrl.Result{}, nil
	}
	if !ptr.Deref(s.Cluster.Status.Initialization.InfrastructureProvisioned, false) {
		res.provisioning = scaffold.NotDone(v1alpha1.WaitingForClusterInfrastructureReason, "")
		return ctrl.Result{}, nil
	}
	if facts.BootstrapDataSecret == nil {
		res.provisioning = scaffold.NotDone(v1alpha1.WaitingForBootstrapDataReason, "")
		return ctrl.Result{}, nil
	}
	mc, err := clusters.MonolithClusterOf(ctx, r.Client, s.Cluster)
	if err != nil || mc == nil {
		return ctrl.Result{}, err
	}
	b, err := r.Backends.ForMachine(mm.Spec.Backend)
	if err != nil {
		res.provisioning = scaffold.NotDone(v1alpha1.FailedReason, err.Error())
		return ctrl.Result{}, err
	}
	claims, err := r.reconcileClaims(ctx, mm, s.Cluster)
	res.addresses = claims.Progress
	if err != nil || !claims.Ready {
		if err == nil {
			// Said here too, so that no earlier reason (WaitingForBootstrapData)
			// stays on the provisioning while the addresses hold it up.
			res.provisioning = scaffold.NotDone(v1alpha1.WaitingForIPAddressesReason, "")
		}
		return ctrl.Result{}, err
	}
	ref := machineRef(mm)
	failureDomain := machineFailureDomain(mm, facts)
	spec := backend.NodeSpec{
		Machine:                 ref,
		Cluster:                 mc.Spec.Backend,
		Backend:                 mm.Spec.Backend,
		ControlPlane:            facts.ControlPlane,
		Version:                 facts.Version,
		FailureDomain:           failureDomain,
		FailureDomainAttributes: failureDomainAttributes(mc, failureDomain),
		StaticAddresses:         claims.Static,
		Workload: backend.WorkloadSpec{
			Endpoint: mc.Spec.ControlPlaneEndpoint,
			Network:  s.Cluster.Spec.ClusterNetwork,
		},
	}
	node, err := b.EnsureNode(ctx, spec)
	if err != nil {
		res.provisioning = scaffold.NotDone(v1alpha1.FailedReason, err.Error())
		return ctrl.Result{}, fmt.Errorf("failed to provision the node: %w", err)
	}
	if !node.Provisioned {
		res.provisioning = scaffold.NotDone(v1alpha1.RunningReason, "Waiting for the node to be created")
		return ctrl.Result{RequeueAfter: provisioningRecheck}, nil
	}
	// Reported as soon as the node exists, as for a real VM: bootstrap
	// follows, and Cluster API waits for the Node for the rest.
	mm.Spec.ProviderID = node.ProviderID
	res.node = &node
	res.provisioning = &scaffold.Progress{Done: true}
	return r.reconcileBootstrap(ctx, s, b, spec, node, *facts.BootstrapDataSecret)
}

// reconcileBootstrap runs the bootstrap data on the provisioned node, then
// makes sure the workload cluster knows the node by its provider ID.
func (r *Reconciler) reconcileBootstrap(ctx context.Context, s *scope, b backend.Backend, spec backend.NodeSpec, node backend.Node, secretName string) (ctrl.Result, error) {
	mm, res := s.Object, &s.Results
	quick, _ := b.(backend.QuickBootstrapper)
	bootstrapped, result, err := bootstrap.Reconcile(ctx, mm, bootstrap.Options{
		Client: r.Client, Tasks: r.Tasks, Backend: b, Node: spec.Machine, SecretName: secretName,
		Quick: quick != nil && quick.BootstrapIsQuick(spec.Machine),
	})
	res.bootstrap = &bootstrapped
	if err != nil || !bootstrapped.Succeeded {
		return result, err
	}
	// Recorded in status, not only in a condition: the next reconcile
	// reads it, and must never run the bootstrap data again.
	mm.Status.Bootstrap.Succeeded = ptr.To(true)
	if registrar, ok := b.(backend.NodeRegistrar); ok {
		data := func(ctx context.Context) (backend.BootstrapData, error) {
			return bootstrap.Data(ctx, r.Client, mm.Namespace, secretName)
		}
		res.workloadNode, err = registerNode(ctx, registrar, spec, node, data)
		if res.workloadNode != nil && res.workloadNode.Done {
			// Recorded now, as the Docker path does: left to the condition
			// alone, the next reconcile (the one this status patch
			// triggers) read it into the field with adoptLegacyConditions
			// and spent a status patch of its own on every machine.
			mm.Status.WorkloadNode.ProviderIDSet = ptr.To(true)
		}
		return ctrl.Result{}, err
	}
	return r.reconcileWorkloadNode(ctx, s, node)
}

// BeforeFinalizer sets, on a machine the finalizer is about to be added
// to, a provider ID its backend knows before it makes the node (inMemory),
// so that one patch writes both: before this, each cost a request of its
// own. Cluster API only reads spec.providerID once
// status.initialization.provisioned is true, which still waits for the
// node.
func (r *Reconciler) BeforeFinalizer(_ context.Context, mm *v1alpha1.MonolithMachine) {
	if mm.Spec.ProviderID != "" || r.owners.of(mm) == nil {
		return
	}
	b, err := r.Backends.ForMachine(mm.Spec.Backend)
	if err != nil {
		return // ReconcileNormal reports it
	}
	if p, ok := b.(backend.ProviderIDPredictor); ok {
		mm.Spec.ProviderID = p.PredictProviderID(machineRef(mm))
	}
}

// removeLegacyFinalizers drops the finalizers earlier releases' second
// MonolithMachine controller (machinepool's instances) set: this controller
// does that work now, under its own finalizer.
func (r *Reconciler) removeLegacyFinalizers(mm *v1alpha1.MonolithMachine) {
	for _, f := range r.owners.legacyFinalizers() {
		controllerutil.RemoveFinalizer(mm, f)
	}
}

// ReconcileDelete cancels the bootstrap, deletes the node and releases the
// machine's addresses.
func (r *Reconciler) ReconcileDelete(ctx context.Context, s *scope) (ctrl.Result, error) {
	mm := s.Object
	s.Results.provisioning = scaffold.NotDone(v1alpha1.DeletingReason, "")
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
	if err := r.releaseClaims(ctx, mm); err != nil {
		return ctrl.Result{}, err
	}
	r.removeLegacyFinalizers(mm)
	return ctrl.Result{}, nil
}

func machineRef(mm *v1alpha1.MonolithMachine) backend.MachineRef {
	return backend.MachineRef{
		Cluster: backend.ClusterRef{Namespace: mm.Namespace, Name: mm.Labels[clusterv1.ClusterNameLabel]},
		Name:    mm.Name,
	}
}

// machineFailureDomain is where the machine's node goes: the owning
// Machine's spec.failureDomain, which Cluster API v1.14 sets (and never
// copies into the MonolithMachine), else the MonolithMachine's own, which
// MachinePool instances carry.
func machineFailureDomain(mm *v1alpha1.MonolithMachine, facts Facts) string {
	if facts.FailureDomain != "" {
		return facts.FailureDomain
	}
	return mm.Spec.FailureDomain
}

// failureDomainAttributes are the attributes the cluster gives the domain
// name, nil when it offers no domain of that name (the node is still
// placed under that name: the Machine's domain is binding).
func failureDomainAttributes(mc *v1alpha1.MonolithCluster, name string) map[string]string {
	if name == "" {
		return nil
	}
	for _, fd := range mc.Spec.FailureDomains {
		if fd.Name == name {
			return fd.Attributes
		}
	}
	return nil
}
