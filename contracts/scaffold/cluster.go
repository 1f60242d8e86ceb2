package scaffold

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"
)

// ErrClusterNotFound is what a ClusterGetter returns when the object names
// a Cluster that the client cannot find: not created yet, gone, or not yet
// in the cache (the informers of different kinds are not in step, so an
// object may arrive before the Cluster it names). (nil, nil) means the
// object names no Cluster.
var ErrClusterNotFound = errors.New("the Cluster the object names was not found")

// ClusterFromOwnerReference finds the Cluster through the object's owner
// reference, which Cluster API sets on infrastructure clusters.
func ClusterFromOwnerReference[T Object](ctx context.Context, c client.Client, obj T) (*clusterv1.Cluster, error) {
	meta := metav1.ObjectMeta{Namespace: obj.GetNamespace(), OwnerReferences: obj.GetOwnerReferences()}
	cluster, err := util.GetOwnerCluster(ctx, c, meta)
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("owner Cluster of %s/%s: %w", obj.GetNamespace(), obj.GetName(), ErrClusterNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("failed to get the owner Cluster: %w", err)
	}
	return cluster, nil
}

// ClusterFromLabel finds the Cluster named by the object's
// cluster.x-k8s.io/cluster-name label, which machine-like objects carry.
func ClusterFromLabel[T Object](ctx context.Context, c client.Client, obj T) (*clusterv1.Cluster, error) {
	name := obj.GetLabels()[clusterv1.ClusterNameLabel]
	if name == "" {
		return nil, nil
	}
	return ClusterByName(ctx, c, obj.GetNamespace(), name)
}

// ClusterByName gets a Cluster; ErrClusterNotFound when it does not exist.
func ClusterByName(ctx context.Context, c client.Client, namespace, name string) (*clusterv1.Cluster, error) {
	cluster := &clusterv1.Cluster{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, cluster); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("cluster %s/%s: %w", namespace, name, ErrClusterNotFound)
		}
		return nil, fmt.Errorf("failed to get Cluster %s/%s: %w", namespace, name, err)
	}
	return cluster, nil
}
