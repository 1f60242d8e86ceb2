package v1alpha1

// The docker backend's marks on the containers it creates: the contract by
// which people, scripts and tests find a cluster's containers on the host.
const (
	// DockerLabelClusterNamespace is the namespace of the Cluster a
	// container belongs to.
	DockerLabelClusterNamespace = "capi-monolith.dev/cluster-namespace"
	// DockerLabelClusterName is the name of the Cluster a container belongs
	// to.
	DockerLabelClusterName = "capi-monolith.dev/cluster-name"
	// DockerLabelMachine is the machine (or machine pool instance) a node
	// container is.
	DockerLabelMachine = "capi-monolith.dev/machine"
	// DockerLabelRole is DockerRoleControlPlane, DockerRoleWorker or
	// DockerRoleLoadBalancer.
	DockerLabelRole = "capi-monolith.dev/role"

	// DockerRoleControlPlane marks control-plane node containers.
	DockerRoleControlPlane = "control-plane"
	// DockerRoleWorker marks worker node containers.
	DockerRoleWorker = "worker"
	// DockerRoleLoadBalancer marks load-balancer containers.
	DockerRoleLoadBalancer = "load-balancer"

	// DockerProviderIDPrefix starts the provider ID of every docker node:
	// docker:////<container name>, as CAPD spells it.
	DockerProviderIDPrefix = "docker:////"
)
