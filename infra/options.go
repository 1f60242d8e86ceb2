package infra

import (
	"github.com/spf13/pflag"

	"github.com/capi-monolith/capi-monolith/infra/internal/backend/docker"
)

// Options are the infra module's settings. They configure the machine
// services built once per manager, so they apply to every MonolithMachine,
// pool instances included.
type Options struct {
	// DockerNodeImageRepository is the image repository of docker nodes
	// whose spec names no image; the tag is the Kubernetes version.
	DockerNodeImageRepository string
	// DockerLoadBalancerHostIP is the host address control plane load
	// balancers are published on.
	DockerLoadBalancerHostIP string
	// DockerUnprivilegedNodes runs node containers without privileged mode.
	DockerUnprivilegedNodes bool
	// DockerManagementCluster is the identity the docker backend labels
	// its containers and networks with, and narrows every lookup to
	// (docker.Options.ManagementCluster). Empty: the UID of the management
	// cluster's kube-system namespace, read at start-up.
	DockerManagementCluster string
}

// DefaultOptions returns the options the flags default to.
func DefaultOptions() Options {
	return Options{
		DockerNodeImageRepository: docker.DefaultNodeImageRepository,
		DockerLoadBalancerHostIP:  docker.DefaultLoadBalancerHostIP,
	}
}

// BindFlags binds o to fs; o's values are the flags' defaults.
func (o *Options) BindFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.DockerNodeImageRepository, "docker-node-image-repository", o.DockerNodeImageRepository,
		"Image repository of docker nodes whose spec names no image; the tag is the Machine's Kubernetes version.")
	fs.StringVar(&o.DockerLoadBalancerHostIP, "docker-load-balancer-host-ip", o.DockerLoadBalancerHostIP,
		"Host address the docker backend publishes control plane load balancers on (0.0.0.0 for every interface).")
	fs.BoolVar(&o.DockerUnprivilegedNodes, "docker-unprivileged-nodes", o.DockerUnprivilegedNodes,
		"Run docker node containers without privileged mode, where the Docker daemon refuses it; kindest/node images need it.")
	fs.Var(managementClusterFlag{&o.DockerManagementCluster}, "docker-management-cluster",
		"Identity of this management cluster on the Docker Engine (at most 63 characters of [A-Za-z0-9_.-]): the docker backend labels its containers and networks "+
			docker.LabelManagementCluster+"=<identity> and finds, adopts and deletes only those. Empty: the UID of the kube-system namespace.")
}

// managementClusterFlag rejects a bad identity when the flags are parsed.
type managementClusterFlag struct{ v *string }

func (f managementClusterFlag) String() string {
	if f.v == nil {
		return ""
	}
	return *f.v
}

func (f managementClusterFlag) Set(s string) error {
	if err := docker.ValidateManagementCluster(s); err != nil {
		return err
	}
	*f.v = s
	return nil
}

func (managementClusterFlag) Type() string { return "string" }

func (o Options) docker() docker.Options {
	return docker.Options{
		NodeImageRepository: o.DockerNodeImageRepository,
		LoadBalancerHostIP:  o.DockerLoadBalancerHostIP,
		UnprivilegedNodes:   o.DockerUnprivilegedNodes,
		ManagementCluster:   o.DockerManagementCluster,
	}
}
