// Package clusters finds the MonolithCluster of a Cluster: the one lookup
// the machine controller, the machine webhook and (through infra/machines)
// the machinepool module share.
package clusters

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
)

// Kind is the kind of our InfraCluster.
const Kind = "MonolithCluster"

// ErrNotMonolithCluster is wrapped by the error of MonolithClusterOf for a
// Cluster whose infrastructure is another provider's.
var ErrNotMonolithCluster = errors.New("the infrastructure is not a MonolithCluster")

// MonolithClusterOf returns the MonolithCluster that cluster's
// spec.infrastructureRef names. It returns nil and no error while that
// object does not exist (Cluster API may create it after the Cluster), and an
// error wrapping ErrNotMonolithCluster when the Cluster's infrastructure is
// not ours.
func MonolithClusterOf(ctx context.Context, c client.Reader, cluster *clusterv1.Cluster) (*v1alpha1.MonolithCluster, error) {
	ref := cluster.Spec.InfrastructureRef
	if ref.Kind != Kind || ref.APIGroup != v1alpha1.GroupVersion.Group {
		return nil, fmt.Errorf("cluster %s has infrastructure %s.%s: %w", cluster.Name, ref.Kind, ref.APIGroup, ErrNotMonolithCluster)
	}
	mc := &v1alpha1.MonolithCluster{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: ref.Name}, mc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("failed to get %s %s: %w", Kind, ref.Name, err)
	}
	return mc, nil
}
