// Package backend is the interface between the infra module's controllers
// and the places machines really run: one controller reconciles
// MonolithClusters and MonolithMachines, and hands the infrastructure work
// to a backend (docker/ runs containers on the Docker Engine, inmemory/
// simulates them). The machinepool module drives the same backends.
//
// Every method is idempotent and restart-safe: a backend finds what it made
// before (by labels or its own records) and adopts it, never making a
// second one; nothing it needs is kept only in an object's status, since
// `clusterctl move` does not restore status.
package backend

import (
	"context"
	"errors"
	"net/netip"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
)

// ErrInvalidBootstrapData is wrapped by Machine.Bootstrap for bootstrap
// data that cannot be read (it decodes past the bound, an encoding is
// broken, its kubeadm configuration does not parse): the node is not
// bootstrapped, and the condition says so with its own reason.
var ErrInvalidBootstrapData = errors.New("invalid bootstrap data")

// ErrUnsupportedBootstrapData is wrapped by Machine.Bootstrap for bootstrap
// data that reads well but that the backend cannot run (the inMemory
// backend runs only kubeadm's): the node is not bootstrapped, and the
// condition says so with its own reason.
var ErrUnsupportedBootstrapData = errors.New("unsupported bootstrap data")

// ClusterRef names the Cluster API Cluster that backend objects belong to.
type ClusterRef struct {
	Namespace string
	Name      string
}

// MachineRef names one machine (or machine pool instance) of a cluster.
type MachineRef struct {
	Cluster ClusterRef
	Name    string
}

// ClusterSpec is what a backend needs to provision a cluster.
type ClusterSpec struct {
	Cluster ClusterRef
	// Backend is the MonolithCluster's backend; only the part of the
	// backend implementing it is set.
	Backend v1alpha1.ClusterBackend
	// Endpoint is the endpoint asked for in the spec, if any.
	Endpoint clusterv1.APIEndpoint
}

// ClusterStatus is what a backend reports of a provisioned cluster.
type ClusterStatus struct {
	// Endpoint is where the control plane is reached.
	Endpoint clusterv1.APIEndpoint
}

// StaticAddress is an address a node must use, from an IP pool.
type StaticAddress struct {
	Address netip.Addr
	Prefix  int
	// Gateway is the zero Addr when the pool has none.
	Gateway netip.Addr
}

// NodeSpec is what a backend needs to provision a node.
type NodeSpec struct {
	Machine MachineRef
	// Cluster is the backend spec of the node's cluster (network, CIDRs).
	Cluster v1alpha1.ClusterBackend
	// Backend is the machine's backend.
	Backend v1alpha1.MachineBackend
	// ControlPlane nodes are put behind the cluster's load balancer.
	ControlPlane bool
	// Version is the Kubernetes version of the Machine, e.g. v1.36.3.
	Version string
	// FailureDomain the node is placed in, if any: the Machine's
	// spec.failureDomain.
	FailureDomain string
	// FailureDomainAttributes are the attributes the MonolithCluster gives
	// that failure domain (nil when it lists none of that name); the docker
	// backend reads v1alpha1.FailureDomainNetworkAttribute from them.
	FailureDomainAttributes map[string]string
	// StaticAddresses came from IP pools; the node uses them, in order.
	StaticAddresses []StaticAddress
	// Workload is what the node's workload cluster is, for backends that
	// register nodes in a workload API of their own (NodeRegistrar).
	Workload WorkloadSpec
}

// WorkloadSpec describes the workload cluster a node joins.
type WorkloadSpec struct {
	// Endpoint is the cluster's control plane endpoint.
	Endpoint clusterv1.APIEndpoint
	// Network is the Cluster's spec.clusterNetwork.
	Network clusterv1.ClusterNetwork
}

// Node is what a backend reports of a node.
type Node struct {
	// ProviderID identifies the node to Cluster API.
	ProviderID string
	// Addresses of the node.
	Addresses []clusterv1.MachineAddress
	// Provisioned is false while the node is still being created.
	Provisioned bool
	// FailureDomain the node was placed in, as the backend recorded it when
	// it made the node ("" for none): a node never moves, so this is the
	// domain of its creation even if the spec names another one later.
	FailureDomain string
}

// BootstrapData is the bootstrap provider's output for a machine.
type BootstrapData struct {
	// Value is the data itself (the Secret's "value" key).
	Value []byte
	// Format is "cloud-config" (the default) or "ignition".
	Format string
}

// Progress receives human-readable progress of a long step, shown in the
// step's condition message.
type Progress func(message string)

// Cluster provisions what a cluster needs before its machines.
type Cluster interface {
	// ReconcileCluster makes the cluster's infrastructure exist and up to
	// date (its load balancer points at the current control plane nodes)
	// and returns its status.
	ReconcileCluster(ctx context.Context, spec ClusterSpec) (ClusterStatus, error)
	// DeleteCluster removes everything made for the cluster, leftover nodes
	// included.
	DeleteCluster(ctx context.Context, cluster ClusterRef) error
	// ListNodes returns the machines of the cluster that have a node, so
	// that nodes whose machine is gone can be found and deleted.
	ListNodes(ctx context.Context, cluster ClusterRef) ([]MachineRef, error)
}

// Machine provisions nodes.
type Machine interface {
	// EnsureNode makes the node exist and returns it; Provisioned is false
	// while it is still being created.
	EnsureNode(ctx context.Context, spec NodeSpec) (Node, error)
	// Bootstrap runs the bootstrap data on the node and returns when it is
	// done. It is long-running: the controller calls it outside Reconcile
	// and cancels ctx when the machine is deleted. It runs the data at most
	// once per node, across restarts and `clusterctl move`.
	Bootstrap(ctx context.Context, machine MachineRef, data BootstrapData, progress Progress) error
	// DeleteNode removes the node.
	DeleteNode(ctx context.Context, machine MachineRef) error
}

// NodeRegistrar is implemented by backends that serve their clusters'
// workload API themselves (inMemory): there is no kubelet to register the
// node, so the backend does what kubeadm and the kubelet would have done
// in the workload cluster once the bootstrap data ran.
type NodeRegistrar interface {
	// RegisterNode makes the node's workload objects exist (its Node, and
	// a control plane node's static Pods). Idempotent: the controller calls
	// it on every reconcile of a bootstrapped machine, which also makes
	// them again after a restart; what exists is left as it is. It
	// reports false when the backend serves no workload API for the
	// node's cluster and registered nothing.
	// data reads the machine's bootstrap data, which says how kubeadm
	// would have configured the node; the backend reads it once per node.
	RegisterNode(ctx context.Context, spec NodeSpec, node Node, data func(context.Context) (BootstrapData, error)) (bool, error)
}

// ProviderIDPredictor is implemented by backends that know a node's
// provider ID before they make the node (inMemory: it is derived from the
// machine's name). The controller then writes the provider ID with its
// finalizer, in the one write that must come before anything is made.
type ProviderIDPredictor interface {
	// PredictProviderID is the provider ID EnsureNode will report for the
	// machine's node.
	PredictProviderID(machine MachineRef) string
}

// QuickBootstrapper is implemented by backends whose bootstrap of some
// nodes takes no time worth a background task (inMemory without a
// simulated bootstrap delay). The controller runs such a bootstrap within
// Reconcile, so that the node and its bootstrap are reported in one write
// of the machine's status instead of two.
type QuickBootstrapper interface {
	// BootstrapIsQuick says whether Bootstrap of the machine's node returns
	// at once. Asked after EnsureNode.
	BootstrapIsQuick(machine MachineRef) bool
}

// Backend is a complete backend.
type Backend interface {
	Cluster
	Machine
}
