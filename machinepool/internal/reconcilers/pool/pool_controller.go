// Package pool reconciles MonolithMachinePools, Cluster API's
// InfraMachinePool of capi-monolith, with MachinePool Machines: it reads
// the owning MachinePool's replicas and version, keeps one instance (a
// MonolithMachine that infra's one machine controller provisions) per replica, replaces
// outdated instances within the pool's max-surge / max-unavailable bounds,
// and removes instances by deleting their Machines, so that Cluster API
// drains them first. It keeps spec.providerIDList, status.replicas and
// status.instances exact.
package pool

import (
	"context"
	"errors"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/labels"

	"github.com/capi-monolith/capi-monolith/contracts/scaffold"
	"github.com/capi-monolith/capi-monolith/contracts/watch"
	infrav1 "github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/machinepool/api/v1alpha1"
)

// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=monolithmachinepools,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=monolithmachinepools/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=monolithmachines,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters;machinepools,verbs=get;list;watch
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=monolithclusters,verbs=get;list;watch

// Reconciler reconciles MonolithMachinePools.
type Reconciler struct {
	// Client reads through the shared cache.
	Client           client.Client
	WatchFilterValue string
}

// SetupWithManager registers the controller.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, options controller.Options) error {
	if r.Client == nil {
		return errors.New("pool.Reconciler: Client is required")
	}
	scaffold, err := scaffold.New(scaffold.OptionsWith[*v1alpha1.MonolithMachinePool, results]{
		Client:           r.Client,
		NewObject:        func() *v1alpha1.MonolithMachinePool { return &v1alpha1.MonolithMachinePool{} },
		Phases:           r,
		Finalizer:        v1alpha1.PoolFinalizer,
		GetCluster:       scaffold.ClusterFromLabel[*v1alpha1.MonolithMachinePool],
		RequireCluster:   true,
		WatchFilterValue: r.WatchFilterValue,
		OwnedConditions:  []string{clusterv1.ReadyCondition, v1alpha1.InstancesReadyCondition},
	})
	if err != nil {
		return err
	}
	log := ctrl.LoggerFrom(ctx).WithValues("controller", "monolithmachinepool")
	clusterToPools, err := watch.ClusterToObjects(mgr.GetClient(), &v1alpha1.MonolithMachinePoolList{}, mgr.GetScheme())
	if err != nil {
		return err
	}
	// Only the pool's own watch-filter label counts (the scaffold checks it
	// whatever enqueued the pool): Cluster API's MachinePools and Machines
	// need not carry it.
	return ctrl.NewControllerManagedBy(mgr).
		Named("monolithmachinepool").
		For(&v1alpha1.MonolithMachinePool{}, builder.WithPredicates(watch.Filter(mgr.GetScheme(), log, r.WatchFilterValue))).
		WithOptions(options).
		// Instances are owned by their pool (not as controller: their
		// Machine is).
		Watches(&infrav1.MonolithMachine{},
			handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &v1alpha1.MonolithMachinePool{})).
		Watches(&clusterv1.MachinePool{}, handler.EnqueueRequestsFromMapFunc(machinePoolToPool)).
		Watches(&clusterv1.Machine{}, handler.EnqueueRequestsFromMapFunc(r.machineToPool)).
		Watches(&clusterv1.Cluster{}, clusterToPools,
			builder.WithPredicates(watch.ClusterEventsOrInfrastructureProvisioned(mgr.GetScheme(), log, r.WatchFilterValue))).
		Complete(scaffold)
}

// machinePoolToPool maps a MachinePool (replicas, version, bootstrap data)
// to its MonolithMachinePool.
func machinePoolToPool(_ context.Context, o client.Object) []ctrl.Request {
	mp, ok := o.(*clusterv1.MachinePool)
	if !ok {
		return nil
	}
	ref := mp.Spec.Template.Spec.InfrastructureRef
	if ref.APIGroup != v1alpha1.GroupVersion.Group || ref.Kind != "MonolithMachinePool" {
		return nil
	}
	return []ctrl.Request{{NamespacedName: client.ObjectKey{Namespace: mp.Namespace, Name: ref.Name}}}
}

// machineToPool maps a MachinePool Machine (its delete-machine annotation,
// its deletion) to the MonolithMachinePool of its MachinePool.
func (r *Reconciler) machineToPool(ctx context.Context, o client.Object) []ctrl.Request {
	if !labels.IsMachinePoolOwned(o) {
		return nil
	}
	mp, err := util.GetMachinePoolByLabels(ctx, r.Client, o.GetNamespace(), o.GetLabels())
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Failed to get the MachinePool of a Machine", "Machine", client.ObjectKeyFromObject(o))
		return nil
	}
	if mp == nil {
		return nil
	}
	return machinePoolToPool(ctx, mp)
}
