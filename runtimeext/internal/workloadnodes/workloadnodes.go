// Package workloadnodes reads Nodes of workload clusters through the
// kubeconfig Secret Cluster API writes for each cluster, as an in-place
// update extension checks that a machine's update has landed on its Node.
package workloadnodes

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/remote"
)

// requestTimeout bounds one read of a workload cluster: the hook that asks
// has a timeout of its own, and an unreachable cluster must not hold it.
const requestTimeout = 3 * time.Second

// Reader reads workload clusters' Nodes.
type Reader struct {
	// Management reads Machines and the clusters' kubeconfig Secrets: the
	// manager's API reader, so that no informer is started for either.
	Management client.Reader
	// Source names the client in the workload clusters' audit and logs.
	Source string
}

// KubeletVersion returns the Node of machine (the management cluster's
// Machine status says which; "" when it has none yet) and the kubelet
// version that Node reports.
func (r *Reader) KubeletVersion(ctx context.Context, machine client.ObjectKey) (node, version string, err error) {
	m := &clusterv1.Machine{}
	if err := r.Management.Get(ctx, machine, m); err != nil {
		return "", "", fmt.Errorf("failed to read Machine %s: %w", machine, err)
	}
	if !m.Status.NodeRef.IsDefined() {
		return "", "", nil
	}
	node = m.Status.NodeRef.Name
	version, err = r.nodeVersion(ctx, client.ObjectKey{Namespace: m.Namespace, Name: m.Spec.ClusterName}, node)
	return node, version, err
}

func (r *Reader) nodeVersion(ctx context.Context, cluster client.ObjectKey, node string) (string, error) {
	cfg, err := remote.RESTConfig(ctx, r.Source, r.Management, cluster)
	if err != nil {
		return "", fmt.Errorf("failed to read the kubeconfig of cluster %s: %w", cluster, err)
	}
	cfg.Timeout = requestTimeout
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", fmt.Errorf("failed to make a client of cluster %s: %w", cluster, err)
	}
	n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("failed to read Node %s of cluster %s: %w", node, cluster, err)
	}
	return n.Status.NodeInfo.KubeletVersion, nil
}
