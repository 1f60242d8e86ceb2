package inmemory

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/capi-monolith/capi-monolith/infra/internal/backend"
	"github.com/capi-monolith/capi-monolith/infra/internal/workload/hosting"
	"github.com/capi-monolith/capi-monolith/infra/internal/workload/kubeadm"
)

var _ backend.NodeRegistrar = &Backend{}

// zoneLabel is the well-known label of a Node's failure domain.
const zoneLabel = corev1.LabelTopologyZone

func clusterKey(c backend.ClusterRef) types.NamespacedName {
	return types.NamespacedName{Namespace: c.Namespace, Name: c.Name}
}

// serveWorkload gives the cluster its workload API listener; its address
// is the control plane endpoint. An endpoint this process cannot serve (set
// by a person, or recorded before the workload API existed) is kept as it
// is, and nothing answers on it.
func (b *Backend) serveWorkload(ctx context.Context, spec backend.ClusterSpec) (backend.ClusterStatus, error) {
	endpoint, err := b.workload.Serve(ctx, clusterKey(spec.Cluster), spec.Endpoint)
	if errors.Is(err, hosting.ErrNotHosted) {
		ctrl.LoggerFrom(ctx).V(4).Info("The cluster's endpoint is not served by this process: no workload API", "endpoint", spec.Endpoint.Host)
		return backend.ClusterStatus{Endpoint: spec.Endpoint}, nil
	}
	if errors.Is(err, hosting.ErrEndpointInUse) {
		return backend.ClusterStatus{}, fmt.Errorf("%w: %w", backend.ErrEndpointInUse, err)
	}
	if err != nil {
		return backend.ClusterStatus{}, err
	}
	return backend.ClusterStatus{Endpoint: endpoint}, nil
}

// RegisterNode implements backend.NodeRegistrar: the node (named after
// its machine, the hostname EnsureNode reports) joins its
// cluster's workload API as kubeadm and the kubelet would have made it
// join, configured as its kubeadm bootstrap data says.
func (b *Backend) RegisterNode(ctx context.Context, spec backend.NodeSpec, node backend.Node, data func(context.Context) (backend.BootstrapData, error)) (bool, error) {
	if b.workload == nil {
		return false, nil
	}
	c := b.workload.Cluster(clusterKey(spec.Machine.Cluster))
	if c == nil {
		if !b.workload.Hosts(spec.Workload.Endpoint) {
			// An endpoint set by a person: nothing of ours answers on it.
			return false, nil
		}
		return false, fmt.Errorf("the workload API of cluster %s/%s is not served yet", spec.Machine.Cluster.Namespace, spec.Machine.Cluster.Name)
	}
	boot, err := b.bootstrapOf(ctx, spec.Machine, data)
	if err != nil {
		return false, err
	}
	// The CA is only needed for kube-public/cluster-info; a cluster
	// without one (no kubeadm) still gets its Nodes.
	ca, err := c.CACertificate(ctx)
	if err != nil {
		ctrl.LoggerFrom(ctx).V(4).Info("Registering the node without the cluster CA", "reason", err.Error())
	}
	endpoint := c.Endpoint()
	cluster := kubeadm.Cluster{
		Name:                 spec.Machine.Cluster.Name,
		ControlPlaneEndpoint: net.JoinHostPort(endpoint.Host, strconv.Itoa(int(endpoint.Port))),
		KubernetesVersion:    spec.Version,
		PodSubnet:            strings.Join(spec.Workload.Network.Pods.CIDRBlocks, ","),
		ServiceSubnet:        strings.Join(spec.Workload.Network.Services.CIDRBlocks, ","),
		ServiceDomain:        spec.Workload.Network.ServiceDomain,
		CACertPEM:            ca,
	}
	n := kubeadm.Node{
		Name:           spec.Machine.Name,
		ProviderID:     node.ProviderID,
		KubeletVersion: spec.Version,
		ControlPlane:   spec.ControlPlane,
		Labels:         map[string]string{},
	}
	if boot != nil {
		cluster.ClusterConfiguration = boot.ClusterConfiguration
		n.ControlPlane = n.ControlPlane || boot.Role != kubeadm.JoinWorker
		maps.Copy(n.Labels, boot.NodeLabels())
		n.Taints = boot.NodeRegistration.Taints
	}
	for _, a := range node.Addresses {
		switch a.Type {
		case clusterv1.MachineInternalIP:
			n.Addresses = append(n.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: a.Address})
		case clusterv1.MachineHostName:
			n.Addresses = append(n.Addresses, corev1.NodeAddress{Type: corev1.NodeHostName, Address: a.Address})
		}
	}
	if node.FailureDomain != "" {
		n.Labels[zoneLabel] = node.FailureDomain
	}
	if err := kubeadm.Ensure(ctx, c.Store(), cluster, n); err != nil {
		return false, fmt.Errorf("failed to register node %s in the workload API: %w", n.Name, err)
	}
	return true, nil
}

// bootstrapOf returns what the node's bootstrap data says. It is parsed
// once per node and process. Data without kubeadm configuration gives nil
// (the node registers as a plain kubelet would): Bootstrap refuses such
// data, so only a node an earlier release bootstrapped from it gets here,
// and it keeps its Node.
func (b *Backend) bootstrapOf(ctx context.Context, m backend.MachineRef, data func(context.Context) (backend.BootstrapData, error)) (*kubeadm.Bootstrap, error) {
	b.mu.Lock()
	boot, ok := b.bootstraps[m]
	b.mu.Unlock()
	if ok {
		return boot, nil
	}
	d, err := data(ctx)
	if err != nil {
		return nil, err
	}
	if boot, err = parseBootstrap(d); err != nil && !errors.Is(err, backend.ErrUnsupportedBootstrapData) {
		return nil, err
	}
	b.mu.Lock()
	b.bootstraps[m] = boot
	b.mu.Unlock()
	return boot, nil
}

// parseBootstrap reads kubeadm's configuration from bootstrap data. Only
// data whose kubeadm configuration parses counts as bootstrapped: data
// that cannot be read (past the decoding bound, a cloud-config that is not
// YAML, an Ignition config that is not JSON, a broken encoding, a kubeadm
// configuration that does not parse) is an error wrapping
// backend.ErrInvalidBootstrapData; data that reads well but holds no
// kubeadm configuration (a cloud-config writing other files, a shell
// script, another format) one wrapping backend.ErrUnsupportedBootstrapData:
// this backend simulates kubeadm and nothing else, so such data would
// make a Node that no kubeadm made.
func parseBootstrap(d backend.BootstrapData) (*kubeadm.Bootstrap, error) {
	boot, err := kubeadm.Parse(d.Value, d.Format)
	switch {
	case err == nil:
		return boot, nil
	case errors.Is(err, kubeadm.ErrTooLarge) || errors.Is(err, kubeadm.ErrMalformed) || !errors.Is(err, kubeadm.ErrNotKubeadm):
		return nil, fmt.Errorf("%w: %w", backend.ErrInvalidBootstrapData, err)
	default:
		return nil, fmt.Errorf("%w: %w; the inMemory backend runs only kubeadm bootstrap data, as Cluster API's kubeadm bootstrap provider writes it",
			backend.ErrUnsupportedBootstrapData, err)
	}
}

// unregisterNode removes the node from its cluster's workload API, if the
// cluster is served.
func (b *Backend) unregisterNode(ctx context.Context, m backend.MachineRef) error {
	if b.workload == nil {
		return nil
	}
	c := b.workload.Cluster(clusterKey(m.Cluster))
	if c == nil {
		return nil
	}
	if err := kubeadm.Remove(ctx, c.Store(), m.Name); err != nil {
		return fmt.Errorf("failed to remove node %s from the workload API: %w", m.Name, err)
	}
	return nil
}

// describeBootstrap names what the bootstrap data would run, for the
// progress message: kubeadm data is recognised and mimicked, never run.
func describeBootstrap(boot *kubeadm.Bootstrap) string {
	if boot == nil {
		return "bootstrap data"
	}
	switch boot.Role {
	case kubeadm.Init:
		return "kubeadm init"
	case kubeadm.JoinControlPlane:
		return "kubeadm join --control-plane"
	default:
		return "kubeadm join"
	}
}
