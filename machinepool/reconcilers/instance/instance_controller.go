// Package instance provisions the instances of MonolithMachinePools. Each
// instance is a MonolithMachine labelled cluster.x-k8s.io/pool-name (a
// MachinePool Machine's infrastructure), which the pool controller creates
// and the infra module's machine controller leaves alone. In order: wait
// for the cluster's infrastructure and the MachinePool's bootstrap data;
// claim the addresses the pool template asks of IP pools (the infra
// module's claim code, infra/addressclaims); create the node through the
// backend and report its provider ID and addresses; run the bootstrap data
// on it as a background task. Deletion, which Cluster API starts by
// deleting the instance's Machine, cancels the task, deletes the node, then
// releases the claims.
package instance

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util/labels"
	"sigs.k8s.io/cluster-api/util/labels/format"

	contractreconcile "github.com/capi-monolith/capi-monolith/contracts/reconcile"
	"github.com/capi-monolith/capi-monolith/contracts/watch"
	infrav1 "github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/infra/backend"
	"github.com/capi-monolith/capi-monolith/infra/tasks"
	"github.com/capi-monolith/capi-monolith/machinepool/api/v1alpha1"
)

// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=monolithmachines,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=monolithmachines/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=monolithclusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters;clusters/status;machinepools;machinepools/status;machines,verbs=get;list;watch
// +kubebuilder:rbac:groups=ipam.cluster.x-k8s.io,resources=ipaddressclaims,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=ipam.cluster.x-k8s.io,resources=ipaddresses,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get

// Reconciler provisions pool instances.
type Reconciler struct {
	// Client reads through the shared cache.
	Client           client.Client
	Backends         backend.Set
	Tasks            *tasks.Manager
	WatchFilterValue string
}

// SetupWithManager registers the controller.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, options controller.Options) error {
	if r.Client == nil || r.Tasks == nil {
		return errors.New("instance.Reconciler: Client and Tasks are required")
	}
	scaffold, err := contractreconcile.New(contractreconcile.Options[*infrav1.MonolithMachine]{
		Client:           r.Client,
		NewObject:        func() *infrav1.MonolithMachine { return &infrav1.MonolithMachine{} },
		Phases:           r,
		Finalizer:        v1alpha1.InstanceFinalizer,
		GetCluster:       contractreconcile.ClusterFromLabel[*infrav1.MonolithMachine],
		RequireCluster:   true,
		WatchFilterValue: r.WatchFilterValue,
		OwnedConditions: []string{clusterv1.ReadyCondition, infrav1.BackendMachineProvisionedCondition,
			infrav1.BootstrapExecSucceededCondition, infrav1.IPAddressesClaimedCondition},
	})
	if err != nil {
		return err
	}
	log := ctrl.LoggerFrom(ctx).WithValues("controller", "monolithmachinepool-instance")
	isInstance := predicate.NewPredicateFuncs(func(o client.Object) bool { return labels.IsMachinePoolOwned(o) })
	return ctrl.NewControllerManagedBy(mgr).
		Named("monolithmachinepool-instance").
		For(&infrav1.MonolithMachine{}, builder.WithPredicates(watch.Filter(mgr.GetScheme(), log, r.WatchFilterValue), isInstance)).
		WithOptions(options).
		// The scaffold checks the instance's watch-filter label; the
		// MachinePool need not carry it.
		Watches(&clusterv1.MachinePool{}, handler.EnqueueRequestsFromMapFunc(r.machinePoolToInstances)).
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(r.clusterToInstances),
			builder.WithPredicates(watch.ClusterEventsOrInfrastructureProvisioned(mgr.GetScheme(), log, r.WatchFilterValue))).
		Owns(&ipamv1.IPAddressClaim{}).
		WatchesRawSource(r.Tasks.Source()).
		Complete(onlyInstances{client: r.Client, next: scaffold})
}

// onlyInstances passes on the requests of pool instances only: claims and
// bootstrap tasks of single MonolithMachines reach this controller too,
// and are the infra module's.
type onlyInstances struct {
	client client.Client
	next   reconcile.Reconciler
}

func (o onlyInstances) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	mm := &infrav1.MonolithMachine{}
	if err := o.client.Get(ctx, req.NamespacedName, mm); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("failed to get %s: %w", req.NamespacedName, err)
	}
	if !labels.IsMachinePoolOwned(mm) {
		return ctrl.Result{}, nil
	}
	return o.next.Reconcile(ctx, req)
}

// machinePoolToInstances maps a MachinePool (whose bootstrap data or
// version changed) to its instances.
func (r *Reconciler) machinePoolToInstances(ctx context.Context, o client.Object) []ctrl.Request {
	mp, ok := o.(*clusterv1.MachinePool)
	if !ok {
		return nil
	}
	return r.instances(ctx, mp.Namespace, client.MatchingLabels{
		clusterv1.ClusterNameLabel:     mp.Spec.ClusterName,
		clusterv1.MachinePoolNameLabel: format.MustFormatValue(mp.Name),
	})
}

// clusterToInstances maps a Cluster (paused, unpaused, provisioned) to the
// instances of its pools.
func (r *Reconciler) clusterToInstances(ctx context.Context, o client.Object) []ctrl.Request {
	return r.instances(ctx, o.GetNamespace(), client.MatchingLabels{clusterv1.ClusterNameLabel: o.GetName()},
		client.HasLabels{clusterv1.MachinePoolNameLabel})
}

func (r *Reconciler) instances(ctx context.Context, namespace string, opts ...client.ListOption) []ctrl.Request {
	list := &infrav1.MonolithMachineList{}
	if err := r.Client.List(ctx, list, append(opts, client.InNamespace(namespace))...); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Failed to list the instances to reconcile")
		return nil
	}
	reqs := make([]ctrl.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return reqs
}
