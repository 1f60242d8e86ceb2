package cluster

import (
	"context"
	"errors"
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/capi-monolith/capi-monolith/contracts/scaffold"
	"github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/infra/internal/backend"
)

// ReconcileNormal provisions the cluster's infrastructure. It records what
// it finds in s.Results; UpdateStatus derives the conditions and status
// fields from them.
func (r *Reconciler) ReconcileNormal(ctx context.Context, s *scope) (ctrl.Result, error) {
	mc, res := s.Object, &s.Results
	b, err := r.Backends.ForCluster(mc.Spec.Backend)
	if err != nil {
		res.loadBalancer = scaffold.NotDone(v1alpha1.FailedReason, err.Error())
		return ctrl.Result{}, fmt.Errorf("failed to pick the backend: %w", err)
	}
	status, err := b.ReconcileCluster(ctx, backend.ClusterSpec{
		Cluster:  backend.ClusterRef{Namespace: s.Cluster.Namespace, Name: s.Cluster.Name},
		Backend:  mc.Spec.Backend,
		Endpoint: mc.Spec.ControlPlaneEndpoint,
	})
	if errors.Is(err, backend.ErrEndpointInUse) {
		res.loadBalancer = scaffold.NotDone(v1alpha1.WaitingForEndpointReason, err.Error())
		ctrl.LoggerFrom(ctx).V(2).Info("Waiting for the recorded endpoint to be let go", "reason", err.Error())
		return ctrl.Result{RequeueAfter: endpointRecheck}, nil
	}
	if err != nil {
		res.loadBalancer = scaffold.NotDone(v1alpha1.FailedReason, "Failed to provision the load balancer")
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
	res.provisioned = true
	res.loadBalancer = &scaffold.Progress{Done: true}
	return ctrl.Result{}, nil
}

// ReconcileDelete releases everything the backend made for the cluster.
func (r *Reconciler) ReconcileDelete(ctx context.Context, s *scope) (ctrl.Result, error) {
	mc := s.Object
	s.Results.loadBalancer = scaffold.NotDone(v1alpha1.DeletingReason, "")
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
