// Package cluster reconciles MonolithClusters, Cluster API's infrastructure
// clusters of capi-monolith: through the cluster's backend it provisions the
// control plane load balancer, reports the control plane endpoint, the
// failure domains and status.initialization.provisioned, and releases
// everything on delete.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
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
	scaffold, err := scaffold.New(scaffold.Options[*v1alpha1.MonolithCluster]{
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

// ReconcileNormal provisions the cluster's infrastructure.
func (r *Reconciler) ReconcileNormal(ctx context.Context, s *scaffold.Scope[*v1alpha1.MonolithCluster]) (ctrl.Result, error) {
	mc := s.Object
	b, err := r.Backends.ForCluster(mc.Spec.Backend)
	if err != nil {
		setLoadBalancer(mc, metav1.ConditionFalse, v1alpha1.FailedReason, err.Error())
		return ctrl.Result{}, fmt.Errorf("failed to pick the backend: %w", err)
	}
	status, err := b.ReconcileCluster(ctx, backend.ClusterSpec{
		Cluster:  backend.ClusterRef{Namespace: s.Cluster.Namespace, Name: s.Cluster.Name},
		Backend:  mc.Spec.Backend,
		Endpoint: mc.Spec.ControlPlaneEndpoint,
	})
	if errors.Is(err, backend.ErrEndpointInUse) {
		setLoadBalancer(mc, metav1.ConditionFalse, v1alpha1.WaitingForEndpointReason, err.Error())
		ctrl.LoggerFrom(ctx).V(2).Info("Waiting for the recorded endpoint to be let go", "reason", err.Error())
		return ctrl.Result{RequeueAfter: endpointRecheck}, nil
	}
	if err != nil {
		setLoadBalancer(mc, metav1.ConditionFalse, v1alpha1.FailedReason, "Failed to provision the load balancer")
		return ctrl.Result{}, fmt.Errorf("failed to provision the cluster infrastructure: %w", err)
	}
	if !mc.Spec.ControlPlaneEndpoint.IsValid() {
		mc.Spec.ControlPlaneEndpoint = status.Endpoint
	}
	if err := r.deleteLeftoverNodes(ctx, b, clusterRef(mc, s.Cluster)); err != nil {
		// Not a reason to hold the cluster back: logged, tried again on the
		// next reconcile.
		ctrl.LoggerFrom(ctx).Error(err, "Failed to delete leftover nodes")
	}
	mc.Status.FailureDomains = mc.Spec.FailureDomains
	mc.Status.Initialization.Provisioned = ptr.To(true)
	setLoadBalancer(mc, metav1.ConditionTrue, v1alpha1.ProvisionedReason, "")
	return ctrl.Result{}, nil
}

// ReconcileDelete releases everything the backend made for the cluster.
func (r *Reconciler) ReconcileDelete(ctx context.Context, s *scaffold.Scope[*v1alpha1.MonolithCluster]) (ctrl.Result, error) {
	mc := s.Object
	setLoadBalancer(mc, metav1.ConditionFalse, v1alpha1.DeletingReason, "")
	b, err := r.Backends.ForCluster(mc.Spec.Backend)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("failed to pick the backend: %w", err)
	}
	ref := clusterRef(mc, s.Cluster)
	ctrl.LoggerFrom(ctx).Info("Deleting cluster infrastructure")
	if err := b.DeleteCluster(ctx, ref); err != nil {
		return ctrl.Result{}, fmt.Errorf("failed to delete the cluster infrastructure: %w", err)
	}
	return ctrl.Result{}, nil
}

// clusterRef names the backend's cluster; without the Cluster (deleted
// first) the owner reference still names it.
func clusterRef(mc *v1alpha1.MonolithCluster, cluster *clusterv1.Cluster) backend.ClusterRef {
	if cluster != nil {
		return backend.ClusterRef{Namespace: cluster.Namespace, Name: cluster.Name}
	}
	for _, ref := range mc.OwnerReferences {
		if ref.Kind == "Cluster" {
			return backend.ClusterRef{Namespace: mc.Namespace, Name: ref.Name}
		}
	}
	return backend.ClusterRef{Namespace: mc.Namespace, Name: mc.Labels[clusterv1.ClusterNameLabel]}
}

// UpdateStatus summarises the backend's conditions into Ready.
func (r *Reconciler) UpdateStatus(ctx context.Context, s *scaffold.Scope[*v1alpha1.MonolithCluster]) {
	if err := conditions.SetSummaryCondition(s.Object, s.Object, clusterv1.ReadyCondition,
		conditions.ForConditionTypes{v1alpha1.LoadBalancerAvailableCondition}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Failed to summarise the Ready condition")
	}
}

func setLoadBalancer(mc *v1alpha1.MonolithCluster, status metav1.ConditionStatus, reason, message string) {
	conditions.Set(mc, metav1.Condition{
		Type: v1alpha1.LoadBalancerAvailableCondition, Status: status, Reason: reason, Message: message,
		ObservedGeneration: mc.Generation,
	})
}
