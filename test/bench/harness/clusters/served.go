package clusters

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/kubeconfig"
	"sigs.k8s.io/cluster-api/util/secret"

	infrav1 "github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
)

// CreateServed makes a Cluster and its inMemory MonolithCluster, waits (up
// to timeout) for the provider to serve it and record its endpoint, and
// writes what core and the control plane provider would: the endpoint on
// the Cluster, the cluster certificates and the admin kubeconfig, so that
// the cluster's workload API can be dialled with the kubeconfig Secret.
// Unlike Create, it leaves the MonolithCluster to the provider.
func CreateServed(ctx context.Context, c client.Client, namespace, name string, timeout time.Duration) (*clusterv1.Cluster, error) {
	cl := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: clusterv1.ClusterSpec{
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "MonolithCluster", Name: name},
		},
	}
	if err := c.Create(ctx, cl); err != nil {
		return nil, fmt.Errorf("failed to create Cluster %s: %w", name, err)
	}
	owner := metav1.OwnerReference{APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: name, UID: cl.UID}
	mc := &infrav1.MonolithCluster{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace, Name: name, Labels: map[string]string{clusterv1.ClusterNameLabel: name},
			OwnerReferences: []metav1.OwnerReference{owner},
		},
		Spec: infrav1.MonolithClusterSpec{Backend: infrav1.ClusterBackend{InMemory: &infrav1.InMemoryClusterBackend{}}},
	}
	if err := c.Create(ctx, mc); err != nil {
		return nil, fmt.Errorf("failed to create MonolithCluster %s: %w", name, err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		return c.Get(ctx, client.ObjectKeyFromObject(mc), mc) == nil && mc.Spec.ControlPlaneEndpoint.IsValid(), nil
	}); err != nil {
		return nil, fmt.Errorf("MonolithCluster %s has no endpoint: %w", name, err)
	}
	patch := client.MergeFrom(cl.DeepCopy())
	cl.Spec.ControlPlaneEndpoint = mc.Spec.ControlPlaneEndpoint
	if err := c.Patch(ctx, cl, patch); err != nil {
		return nil, fmt.Errorf("failed to set Cluster %s's endpoint: %w", name, err)
	}
	certificates := secret.NewCertificatesForInitialControlPlane(nil)
	if err := certificates.Generate(); err != nil {
		return nil, fmt.Errorf("failed to generate Cluster %s's certificates: %w", name, err)
	}
	if err := certificates.SaveGenerated(ctx, c, client.ObjectKeyFromObject(cl), owner); err != nil {
		return nil, fmt.Errorf("failed to save Cluster %s's certificates: %w", name, err)
	}
	if err := kubeconfig.CreateSecret(ctx, c, cl); err != nil {
		return nil, fmt.Errorf("failed to write Cluster %s's kubeconfig: %w", name, err)
	}
	return cl, nil
}
