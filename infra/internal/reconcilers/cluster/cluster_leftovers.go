package cluster

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/infra/internal/backend"
)

// deleteLeftoverNodes deletes the cluster's nodes whose MonolithMachine is
// gone: what a manager killed between creating a node and recording it, or
// a finalizer removed by hand, leaves behind (CAPD leaves such containers
// running until someone finds them). Machine pool instances are
// MonolithMachines too, so they are covered.
//
// A node is made only for a MonolithMachine that exists, and is deleted
// before its MonolithMachine's finalizer goes, so a node without one is a
// leftover. The API server is asked, not the cache, so that a cache behind
// by one event never costs a live node.
func (r *Reconciler) deleteLeftoverNodes(ctx context.Context, b backend.Backend, cluster backend.ClusterRef) error {
	nodes, err := b.ListNodes(ctx, cluster)
	if err != nil {
		return fmt.Errorf("failed to list the cluster's nodes: %w", err)
	}
	for _, node := range nodes {
		mm := &metav1.PartialObjectMetadata{}
		mm.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("MonolithMachine"))
		err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: node.Name}, mm)
		switch {
		case err == nil:
			continue
		case !apierrors.IsNotFound(err):
			return fmt.Errorf("failed to check MonolithMachine %s: %w", node.Name, err)
		}
		ctrl.LoggerFrom(ctx).Info("Deleting a leftover node: its MonolithMachine is gone", "node", node.Name)
		if err := b.DeleteNode(ctx, node); err != nil {
			return fmt.Errorf("failed to delete leftover node %s: %w", node.Name, err)
		}
	}
	return nil
}
