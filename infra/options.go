package infra

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"net/netip"
	"strconv"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/capi-monolith/capi-monolith/infra/internal/backend/docker"
	"github.com/capi-monolith/capi-monolith/infra/internal/workload/hosting"
	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
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
	// InMemoryWorkloadAddress is the IP address the inMemory clusters'
	// workload API listeners are opened on, and their endpoints' host
	// unless InMemoryWorkloadAdvertiseHost is set.
	InMemoryWorkloadAddress netip.Addr
	// InMemoryWorkloadAdvertiseHost is the endpoints' host (a DNS name or
	// an IP address) when it is not the listen address: in an installed
	// provider, the headless Service's name, which outlives the pod's IP.
	InMemoryWorkloadAdvertiseHost string
	// InMemoryWorkloadPorts are the ports those listeners take, one per
	// cluster.
	InMemoryWorkloadPorts hosting.PortRange
	// InMemoryWorkloadStateDir keeps every inMemory cluster's workload
	// objects in a journal file per cluster, so that they survive a restart
	// of the process; empty keeps them in memory only. dev sets it under
	// --data-dir (see KeepStateIn).
	InMemoryWorkloadStateDir string
	// InMemoryWorkloadLimits bound each inMemory cluster's workload API:
	// objects, their bytes, open watches and requests in flight.
	InMemoryWorkloadLimits store.Limits
	// InMemoryWorkloadState is where every inMemory cluster's workload
	// objects are kept: StateDir (files in InMemoryWorkloadStateDir, or
	// nowhere without one) or StateSecrets (Secrets of the management
	// cluster, in each cluster's namespace, which survive the pod and
	// follow leadership).
	InMemoryWorkloadState string
	// InMemoryWorkloadLeaderLease (NAMESPACE/NAME) is the Lease where the
	// leading replica publishes the address its workload API listeners
	// answer on: with it every replica listens on every cluster's endpoint
	// and the others forward to the leader. Empty: one replica serves.
	InMemoryWorkloadLeaderLease string
}

// Values of InMemoryWorkloadState.
const (
	StateDir     = "dir"
	StateSecrets = "secrets"
)

// DefaultOptions returns the options the flags default to.
func DefaultOptions() Options {
	return Options{
		DockerNodeImageRepository: docker.DefaultNodeImageRepository,
		DockerLoadBalancerHostIP:  docker.DefaultLoadBalancerHostIP,
		InMemoryWorkloadAddress:   DefaultInMemoryWorkloadAddress,
		InMemoryWorkloadPorts:     hosting.DefaultPortRange,
		InMemoryWorkloadLimits: store.Limits{
			MaxObjects:          store.DefaultMaxObjects,
			MaxBytes:            store.DefaultMaxBytes,
			MaxWatches:          store.DefaultMaxWatches,
			MaxRequestsInFlight: store.DefaultMaxRequestsInFlight,
		},
		InMemoryWorkloadState: StateDir,
	}
}

// DefaultInMemoryWorkloadAddress is loopback: a workload API is reachable
// from this machine only unless a flag says otherwise.
var DefaultInMemoryWorkloadAddress = netip.MustParseAddr("127.0.0.1")

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
	fs.Var(workloadAddressFlag{&o.InMemoryWorkloadAddress}, "inmemory-workload-address",
		"IP address the inMemory clusters' workload Kubernetes APIs listen on, one port per cluster; without --inmemory-workload-advertise-host it is their control plane endpoint's host, so it must be one Cluster API's controllers and kubectl can dial (0.0.0.0 or :: only with an advertised host).")
	fs.Var(advertiseHostFlag{&o.InMemoryWorkloadAdvertiseHost}, "inmemory-workload-advertise-host",
		"Host (DNS name or IP address) recorded in the inMemory clusters' control plane endpoints and named by their serving certificates, when it is not --inmemory-workload-address: the bundle sets the headless workload Service's DNS name. Empty: the listen address.")
	fs.StringVar(&o.InMemoryWorkloadStateDir, "inmemory-workload-state-dir", o.InMemoryWorkloadStateDir,
		"Folder that keeps every inMemory workload cluster's objects across restarts (one journal file per cluster, mode 0600); empty keeps them in memory only.")
	fs.Var(stateFlag{&o.InMemoryWorkloadState}, "inmemory-workload-state",
		"Where every inMemory workload cluster's objects are kept across restarts: dir (journal files in --inmemory-workload-state-dir; in memory only without one) or secrets (Secrets in each cluster's namespace, owned by its MonolithCluster: they survive the pod and follow leadership to another replica).")
	fs.StringVar(&o.InMemoryWorkloadLeaderLease, "inmemory-workload-leader-lease", o.InMemoryWorkloadLeaderLease,
		"NAMESPACE/NAME of the Lease where the leading replica publishes its --inmemory-workload-address: every replica then listens on every inMemory cluster's endpoint and forwards connections to the leader (with --leader-elect and several replicas). Empty: the leader alone listens.")
	fs.Var(portRangeFlag{&o.InMemoryWorkloadPorts}, "inmemory-workload-port-range",
		"Ports (FIRST-LAST) the inMemory clusters' workload API listeners take, one per cluster.")
	fs.Var(&minIntFlag{v: &o.InMemoryWorkloadLimits.MaxObjects, min: minWorkloadObjects}, "inmemory-workload-max-objects",
		fmt.Sprintf("Objects each inMemory workload cluster may hold (at least %d); a create past it is 403 Forbidden (\"exceeded quota\"), as a ResourceQuota answers.", minWorkloadObjects))
	fs.Var(&bytesFlag{v: &o.InMemoryWorkloadLimits.MaxBytes, min: minWorkloadBytes}, "inmemory-workload-max-bytes",
		"Bytes (as JSON; a quantity such as 64Mi, at least 4Mi) the objects of each inMemory workload cluster may take together; a create or an update that grows them past it is 403 Forbidden (\"exceeded quota\"). One object is at most 1.5 MiB, as etcd takes.")
	fs.Var(&minIntFlag{v: &o.InMemoryWorkloadLimits.MaxWatches, min: 1}, "inmemory-workload-max-watches",
		"Watches each inMemory workload cluster may have open; one more is 429 TooManyRequests with Retry-After.")
	fs.Var(&minIntFlag{v: &o.InMemoryWorkloadLimits.MaxRequestsInFlight, min: 1}, "inmemory-workload-max-requests-inflight",
		"Requests other than watches each inMemory workload cluster may have served at once; one more is 429 TooManyRequests with Retry-After, so that one cluster's load never holds up another's.")
}

// Lower bounds of the workload limits: a cluster must hold what kubeadm
// makes, and an object of the largest size.
const (
	minWorkloadObjects = 100
	minWorkloadBytes   = 4 << 20
)

// minIntFlag is an integer flag refusing values below min when parsed.
type minIntFlag struct {
	v   *int
	min int
}

func (f *minIntFlag) String() string {
	if f.v == nil {
		return ""
	}
	return strconv.Itoa(*f.v)
}

func (f *minIntFlag) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil {
		return fmt.Errorf("%q is not a whole number", s)
	}
	if n < f.min {
		return fmt.Errorf("%d is below the minimum of %d", n, f.min)
	}
	*f.v = n
	return nil
}

func (*minIntFlag) Type() string { return "int" }

// bytesFlag is a size given as a Kubernetes quantity (64Mi, 100M, 1048576),
// refusing values below min when parsed.
type bytesFlag struct {
	v   *int64
	min int64
}

func (f *bytesFlag) String() string {
	if f.v == nil {
		return ""
	}
	return resource.NewQuantity(*f.v, resource.BinarySI).String()
}

func (f *bytesFlag) Set(s string) error {
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return fmt.Errorf("%q is not a quantity of bytes such as 64Mi: %w", s, err)
	}
	n, ok := q.AsInt64()
	if !ok {
		return fmt.Errorf("%q is not a whole number of bytes", s)
	}
	if n < f.min {
		return fmt.Errorf("%s is below the minimum of %s", s, resource.NewQuantity(f.min, resource.BinarySI))
	}
	*f.v = n
	return nil
}

func (*bytesFlag) Type() string { return "quantity" }

// workloadAddressFlag rejects an address clients cannot dial when the
// flags are parsed.
type workloadAddressFlag struct{ v *netip.Addr }

func (f workloadAddressFlag) String() string {
	if f.v == nil || !f.v.IsValid() {
		return ""
	}
	return f.v.String()
}

func (f workloadAddressFlag) Set(s string) error {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return fmt.Errorf("%q is not an IP address", s)
	}
	*f.v = a
	return nil
}

func (workloadAddressFlag) Type() string { return "ip" }

// advertiseHostFlag rejects a host clients cannot dial when the flags are
// parsed.
type advertiseHostFlag struct{ v *string }

func (f advertiseHostFlag) String() string {
	if f.v == nil {
		return ""
	}
	return *f.v
}

func (f advertiseHostFlag) Set(s string) error {
	if s != "" {
		if err := hosting.ValidateAdvertiseHost(s); err != nil {
			return err
		}
	}
	*f.v = s
	return nil
}

func (advertiseHostFlag) Type() string { return "host" }

// leaderLease splits InMemoryWorkloadLeaderLease.
func (o Options) leaderLease() (namespace, name string, err error) {
	namespace, name, ok := strings.Cut(o.InMemoryWorkloadLeaderLease, "/")
	if !ok || len(validation.IsDNS1123Label(namespace)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0 {
		return "", "", fmt.Errorf("--inmemory-workload-leader-lease=%q is not NAMESPACE/NAME", o.InMemoryWorkloadLeaderLease)
	}
	return namespace, name, nil
}

// Validate checks what no single flag can: an unspecified listen address
// needs an advertised host, which clients dial instead.
func (o Options) Validate() error {
	if o.InMemoryWorkloadAddress.IsUnspecified() && o.InMemoryWorkloadAdvertiseHost == "" {
		return fmt.Errorf("--inmemory-workload-address=%s is not an address clients can dial: set --inmemory-workload-advertise-host too", o.InMemoryWorkloadAddress)
	}
	if o.InMemoryWorkloadLeaderLease != "" {
		if _, _, err := o.leaderLease(); err != nil {
			return err
		}
		if o.InMemoryWorkloadAddress.IsUnspecified() {
			return fmt.Errorf("--inmemory-workload-leader-lease needs an --inmemory-workload-address the other replicas can dial, not %s", o.InMemoryWorkloadAddress)
		}
		if o.InMemoryWorkloadState != StateSecrets {
			return errors.New("--inmemory-workload-leader-lease needs --inmemory-workload-state=secrets: the next leader reads the clusters' objects from there")
		}
	}
	return nil
}

// stateFlag accepts the values of InMemoryWorkloadState.
type stateFlag struct{ v *string }

func (f stateFlag) String() string {
	if f.v == nil {
		return ""
	}
	return *f.v
}

func (f stateFlag) Set(s string) error {
	if s != StateDir && s != StateSecrets {
		return fmt.Errorf("%q is neither %s nor %s", s, StateDir, StateSecrets)
	}
	*f.v = s
	return nil
}

func (stateFlag) Type() string { return "dir|secrets" }

// portRangeFlag parses FIRST-LAST.
type portRangeFlag struct{ v *hosting.PortRange }

func (f portRangeFlag) String() string {
	if f.v == nil {
		return ""
	}
	return f.v.String()
}

func (f portRangeFlag) Set(s string) error {
	r, err := hosting.ParsePortRange(s)
	if err != nil {
		return err
	}
	*f.v = r
	return nil
}

func (portRangeFlag) Type() string { return "ports" }

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
