package v1alpha1

import (
	"strings"
	"time"
)

// Condition types and reasons shared by the infra kinds.
const (
	// LoadBalancerAvailableCondition is True when the cluster's control
	// plane load balancer serves the endpoint.
	LoadBalancerAvailableCondition = "LoadBalancerAvailable"
	// BackendMachineProvisionedCondition is True when the node exists.
	BackendMachineProvisionedCondition = "BackendMachineProvisioned"
	// BootstrapExecSucceededCondition is True when the bootstrap data ran
	// on the node; its message shows progress while it runs.
	BootstrapExecSucceededCondition = "BootstrapExecSucceeded"
	// IPAddressesClaimedCondition is True when every address asked for in
	// spec.addressesFromPools has been allocated.
	IPAddressesClaimedCondition = "IPAddressesClaimed"
	// WorkloadNodeProviderIDSetCondition is True once the workload
	// cluster's Node of the machine carries the machine's provider ID. It
	// is informational (not part of Ready): Cluster API matches Machines
	// to Nodes by provider ID, and a node image whose kubelet does not set
	// it needs the provider to, as CAPD does.
	WorkloadNodeProviderIDSetCondition = "WorkloadNodeProviderIDSet"

	// WaitingForClusterInfrastructureReason: the cluster is not provisioned.
	WaitingForClusterInfrastructureReason = "WaitingForClusterInfrastructure"
	// WaitingForBootstrapDataReason: the Machine has no bootstrap data yet.
	WaitingForBootstrapDataReason = "WaitingForBootstrapData"
	// WaitingForIPAddressesReason: some IPAddressClaims are not fulfilled.
	WaitingForIPAddressesReason = "WaitingForIPAddresses"
	// WaitingForWorkloadClusterReason: the workload cluster's kubeconfig
	// is missing or its API server does not answer yet.
	WaitingForWorkloadClusterReason = "WaitingForWorkloadCluster"
	// WaitingForNodeReason: the workload cluster has no Node for the
	// machine yet.
	WaitingForNodeReason = "WaitingForNode"
	// WaitingForEndpointReason: another process still holds the recorded
	// control plane endpoint (after clusterctl move, the source's manager).
	WaitingForEndpointReason = "WaitingForEndpoint"
	// ProviderIDMismatchReason: the Node already has another provider ID,
	// which Kubernetes does not let anyone change.
	ProviderIDMismatchReason = "ProviderIDMismatch"
	// ProvisionedReason, ClaimedReason and SucceededReason mark success.
	ProvisionedReason = "Provisioned"
	ClaimedReason     = "Claimed"
	SucceededReason   = "Succeeded"
	SetReason         = "Set"
	// RunningReason: an asynchronous step is under way.
	RunningReason = "Running"
	// FailedReason: a step failed; the message says why, it is retried.
	FailedReason = "Failed"
	// InvalidBootstrapDataReason: the bootstrap data cannot be read (it
	// decodes past the bound, its encoding is broken, or its kubeadm
	// configuration does not parse); the node is not bootstrapped. It is
	// retried, so that a corrected Secret is picked up.
	InvalidBootstrapDataReason = "InvalidBootstrapData"
	// UnsupportedBootstrapDataReason: the bootstrap data reads well but the
	// backend cannot run it: the inMemory backend runs only kubeadm
	// bootstrap data (a kubeadm InitConfiguration or JoinConfiguration, as
	// Cluster API's kubeadm bootstrap provider writes it); the node is not
	// bootstrapped. It is retried, so that a corrected Secret is picked up.
	UnsupportedBootstrapDataReason = "UnsupportedBootstrapData"
	// NotApplicableReason: nothing to do for this object.
	NotApplicableReason = "NotApplicable"
	// DeletingReason: the object is being deleted.
	DeletingReason = "Deleting"
)

const (
	// ClusterFinalizer lets the infra module release a cluster's load
	// balancer and network before the MonolithCluster goes.
	ClusterFinalizer = "monolithcluster.infrastructure.cluster.x-k8s.io"
	// MachineFinalizer lets the infra module delete the node and release its
	// addresses before the MonolithMachine goes.
	MachineFinalizer = "monolithmachine.infrastructure.cluster.x-k8s.io"
	// ClaimFinalizer is set on the IPAddressClaims of a MonolithMachine, so
	// that its addresses are released only after its node is gone.
	ClaimFinalizer = "monolithmachine.infrastructure.cluster.x-k8s.io/ip-claim"
)

// Initialization is the contract's status.initialization.
type Initialization struct {
	// provisioned is true once the infrastructure exists; Cluster API
	// v1.14 reads it (contract v1beta2).
	// +optional
	Provisioned *bool `json:"provisioned,omitempty"`
}

// Defaults of the backend settings, written by the defaulting webhook and
// assumed by the backends when the webhook is off.
const (
	// DefaultDockerNetwork is kind's network, so that kind clusters and
	// Monolith clusters can share it.
	DefaultDockerNetwork = "kind"
	// DefaultDockerLoadBalancerImage is the haproxy image kind and CAPD use
	// for the control plane load balancer.
	DefaultDockerLoadBalancerImage = "kindest/haproxy:v20230606-42a2262b"
	// DefaultInMemoryNodeCIDR is where simulated nodes get their addresses.
	DefaultInMemoryNodeCIDR = "10.128.0.0/16"
)

// MaxSimulatedDelay bounds the inMemory backend's provisioningDelay and
// bootstrapDelay: the webhook rejects more, and the backend never waits
// longer, so that a typo cannot park a machine for years. It stays below the
// bound of one bootstrap run (20 minutes), so that a simulated bootstrap
// always fits in one.
const MaxSimulatedDelay = 15 * time.Minute

// ReservedDockerNetworks are the Docker Engine's predefined networks (and
// swarm's), which a cluster must not use: on "host" the nodes would share
// the host's network namespace and the load balancer would bind every host
// interface; the others are not user networks. Compared case-insensitively.
var ReservedDockerNetworks = []string{"bridge", "default", "docker_gwbridge", "host", "ingress", "nat", "none"}

// IsReservedDockerNetwork reports whether name is one of
// ReservedDockerNetworks.
func IsReservedDockerNetwork(name string) bool {
	for _, r := range ReservedDockerNetworks {
		if strings.EqualFold(name, r) {
			return true
		}
	}
	return false
}
