// Package cluster reconciles MonolithClusters, Cluster API's infrastructure
// clusters of capi-monolith: through the cluster's backend it provisions the
// control plane load balancer, reports the control plane endpoint, the
// failure domains and status.initialization.provisioned, and releases
// everything on delete.
package cluster

import (
	"context"
	"errors"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/predicates"

	"github.com/capi-monolith/capi-monolith/contracts/scaffold"
	"github.com/capi-monolith/capi-monolith/contracts/watch"
	"github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/infra/internal/backend"
)

// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=monolithclusters,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=monolithclusters/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters;clusters/status,verbs=get;list;watch
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=monolithmachines,verbs=get

// endpointRecheck is how soon a cluster whose endpoint another process
// holds tries again: the holder lets go within seconds, and an error's
// exponential backoff would leave the cluster waiting for minutes after.
const endpointRecheck = 2 * time.Second

// Reconciler reconciles MonolithClusters.
type Reconciler struct {
	Client client.Client
	// APIReader reads around the cache, to be sure a machine is gone
	// before its leftover node is deleted.
	APIReader        client.Reader
	Backends         backend.Set
	WatchFilterValue string
}

// SetupWithManager registers the controller.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, options controller.Options) error {
	if r.Client == nil || r.APIReader == nil {
		return errors.New("cluster.Reconciler: Client and APIReader are required")
	}
	scaffold, err := scaffold.New(scaffold.OptionsWith[*v1alpha1.MonolithCluster, results]{
		Client:    r.Client,
		NewObject: func() *v1alpha1.MonolithCluster { return &v1alpha1.MonolithCluster{} },
		Phases:    r,
		Finalizer: v1alpha1.ClusterFinalizer,
		// Cluster API sets the owner reference; the finalizer waits for it
		// so that our patch never races core's server-side apply.
		GetCluster:       scaffold.ClusterFromOwnerReference[*v1alpha1.MonolithCluster],
		RequireCluster:   true,
		WatchFilterValue: r.WatchFilterValue,
		OwnedConditions:  []string{clusterv1.ReadyCondition, v1alpha1.LoadBalancerAvailableCondition},
		// Only this controller writes a MonolithCluster's status. The first
		// provisioning then costs two writes (the endpoint, then the status
		// naming the generation it made) instead of Cluster API's patch
		// helper's four, each of which also woke core's Cluster controller.
		SoleStatusWriter: true,
	})
	if err != nil {
		return err
	}
	log := ctrl.LoggerFrom(ctx).WithValues("controller", "monolithcluster")
	return ctrl.NewControllerManagedBy(mgr).
		Named("monolithcluster").
		For(&v1alpha1.MonolithCluster{}, builder.WithPredicates(
			watch.Filter(mgr.GetScheme(), log, r.WatchFilterValue),
			predicates.ResourceIsNotExternallyManaged(mgr.GetScheme(), log),
		)).
		WithOptions(options).
		Watches(&clusterv1.Cluster{},
			watch.ClusterToInfrastructure(ctx, mgr.GetClient(), v1alpha1.GroupVersion.WithKind("MonolithCluster"), &v1alpha1.MonolithCluster{}),
			builder.WithPredicates(watch.ClusterEvents(mgr.GetScheme(), log, r.WatchFilterValue))).
		Complete(scaffold)
}
