package docker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/infra/internal/backend"
)

// Labels the backend puts on what it creates, so that it finds them again,
// besides the contract labels of v1alpha1 (DockerLabelClusterNamespace,
// DockerLabelClusterName, DockerLabelMachine, DockerLabelRole).
const (
	// LabelFailureDomain is the failure domain a node container was placed
	// in (absent for none).
	LabelFailureDomain = "capi-monolith.dev/failure-domain"
	// LabelNetwork is the Docker network a container was created on.
	LabelNetwork = "capi-monolith.dev/network"
	// LabelCreatedBy marks networks the backend created (value
	// CreatedByValue); only those are ever removed.
	LabelCreatedBy = "capi-monolith.dev/created-by"
	// LabelManagementCluster is the identity of the management cluster
	// whose backend created a container or network (Options.
	// ManagementCluster). Every lookup is narrowed to it, so that two
	// management clusters on one Docker Engine never find, adopt or delete
	// each other's objects, whatever their namespace and cluster names.
	LabelManagementCluster = "capi-monolith.dev/management-cluster"

	// CreatedByValue is the value of LabelCreatedBy.
	CreatedByValue = "capi-monolith"

	// labelPinned marks a load balancer whose address and host port are
	// fixed in its configuration, so that a Docker restart keeps them.
	labelPinned = "capi-monolith.dev/pinned"
)

// Defaults of Options and of the spec fields.
const (
	// DefaultNetwork and DefaultLoadBalancerImage are the API's defaults.
	DefaultNetwork           = v1alpha1.DefaultDockerNetwork
	DefaultLoadBalancerImage = v1alpha1.DefaultDockerLoadBalancerImage
	// DefaultNodeImageRepository is where node images are found:
	// <repository>:<Kubernetes version>.
	DefaultNodeImageRepository = "kindest/node"
	// DefaultLoadBalancerHostIP is the host address the load balancer is
	// published on: the loopback, so that a workload cluster's API server is
	// not exposed to the host's networks unless asked.
	DefaultLoadBalancerHostIP = "127.0.0.1"

	// APIServerPort is the port of the API server in the nodes and of the
	// load balancer's frontend.
	APIServerPort = 6443
)

// DefaultNodeBinds are bound into node containers when Options.NodeBinds is
// nil: the host's kernel modules, read-only, as kind does (kube-proxy and
// CNIs read them).
var DefaultNodeBinds = []string{"/lib/modules:/lib/modules:ro"}

// maxNameLength keeps container names usable as host names (node names).
const maxNameLength = 63

// Options configure a Backend. The zero value is usable.
type Options struct {
	// Client talks to the Docker Engine. Default: a client configured from
	// the environment (DOCKER_HOST, DOCKER_API_VERSION, DOCKER_CERT_PATH,
	// DOCKER_TLS_VERIFY) that negotiates the API version with the daemon;
	// API 1.41 (Docker 20.10) is the oldest tested.
	Client client.APIClient
	// Network is used for clusters whose spec names none.
	// Default DefaultNetwork.
	Network string
	// LoadBalancerImage is used for clusters whose spec names none.
	// Default DefaultLoadBalancerImage.
	LoadBalancerImage string
	// NodeImageRepository makes the image of nodes whose spec names none:
	// <NodeImageRepository>:<Machine version>. Default
	// DefaultNodeImageRepository.
	NodeImageRepository string
	// LoadBalancerHostIP is the host address load balancers are published
	// on. Default DefaultLoadBalancerHostIP; "0.0.0.0" publishes on every
	// interface (a remote Docker host, for instance).
	LoadBalancerHostIP string
	// NodeBinds are host paths bound into every node container, in Docker's
	// "host:container[:options]" form. nil means DefaultNodeBinds; an empty
	// slice binds nothing.
	NodeBinds []string
	// UnprivilegedNodes runs node containers without Docker's privileged
	// mode. kindest/node images need it (systemd, containerd and the
	// kubelet inside); set this only where the daemon refuses privileged
	// containers (sandboxed CI) and the node image does without.
	UnprivilegedNodes bool
	// ManagementCluster identifies the management cluster the backend
	// works for: every container and network it creates is labelled
	// LabelManagementCluster=<ManagementCluster>, and it finds, adopts and
	// deletes only objects so labelled. The infra module sets it (the
	// kube-system namespace's UID unless a flag names it). Empty: no such
	// label and lookups not narrowed to one management cluster (a backend
	// used on its own, outside a manager). At most 63 characters of
	// [A-Za-z0-9_.-].
	ManagementCluster string
}

// Backend runs clusters on a Docker Engine. Create it with New.
type Backend struct {
	client      client.APIClient
	ownsClient  bool
	network     string
	lbImage     string
	nodeRepo    string
	lbHostIP    netip.Addr
	nodeBinds   []string
	privileged  bool
	identity    string
	networkLock sync.Mutex
	// locks serialise work on one load balancer or one node inside this
	// process; Docker's unique names guard against other processes.
	locks sync.Map
}

var _ backend.Backend = &Backend{}

// New returns a Backend with opts' zero fields defaulted. It does not
// contact the daemon.
func New(opts Options) (*Backend, error) {
	b := &Backend{
		client:     opts.Client,
		network:    valueOr(opts.Network, DefaultNetwork),
		lbImage:    valueOr(opts.LoadBalancerImage, DefaultLoadBalancerImage),
		nodeRepo:   valueOr(opts.NodeImageRepository, DefaultNodeImageRepository),
		nodeBinds:  opts.NodeBinds,
		privileged: !opts.UnprivilegedNodes,
		identity:   opts.ManagementCluster,
	}
	if err := ValidateManagementCluster(opts.ManagementCluster); err != nil {
		return nil, err
	}
	if b.nodeBinds == nil {
		b.nodeBinds = DefaultNodeBinds
	}
	hostIP, err := netip.ParseAddr(valueOr(opts.LoadBalancerHostIP, DefaultLoadBalancerHostIP))
	if err != nil {
		return nil, fmt.Errorf("failed to parse the load balancer host IP: %w", err)
	}
	b.lbHostIP = hostIP
	if b.client == nil {
		c, err := client.New(client.FromEnv)
		if err != nil {
			return nil, fmt.Errorf("failed to create a Docker client from the environment: %w", err)
		}
		b.client = c
		b.ownsClient = true
	}
	return b, nil
}

// Close releases the Docker client when New created it.
func (b *Backend) Close() error {
	if b.ownsClient {
		return b.client.Close()
	}
	return nil
}

// Ping checks that the Docker Engine answers, and negotiates the API
// version.
func (b *Backend) Ping(ctx context.Context) error {
	if _, err := b.client.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		return fmt.Errorf("failed to reach the Docker Engine at %s: %w", b.client.DaemonHost(), err)
	}
	return nil
}

func valueOr(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// lock takes the in-process lock of key and returns its unlock.
func (b *Backend) lock(key string) func() {
	m, _ := b.locks.LoadOrStore(key, &sync.Mutex{})
	mu := m.(*sync.Mutex)
	mu.Lock()
	return mu.Unlock
}

// containerName joins parts into a valid Docker container name and host
// name: characters Docker refuses become '-', and a name longer than
// maxNameLength is cut and ended with a hash of all the parts, so that it
// stays unique.
func containerName(parts ...string) string {
	name := sanitizeName(strings.Join(parts, "-"))
	if len(name) <= maxNameLength {
		return name
	}
	return hashedName(parts...)
}

// hashedName is containerName always ended with the hash: the fallback when
// the plain name is taken by a container that is not the one asked for.
func hashedName(parts ...string) string {
	sum := sha256.Sum256([]byte(strings.Join(parts, "/")))
	suffix := "-" + hex.EncodeToString(sum[:])[:8]
	name := sanitizeName(strings.Join(parts, "-"))
	if len(name) > maxNameLength-len(suffix) {
		name = strings.TrimRight(name[:maxNameLength-len(suffix)], "-_.")
	}
	return name + suffix
}

// sanitizeName maps a string on Docker's name alphabet
// [a-zA-Z0-9][a-zA-Z0-9_.-]*.
func sanitizeName(s string) string {
	var sb strings.Builder
	for i, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
			sb.WriteRune(r)
		case i > 0 && (r == '-' || r == '_' || r == '.'):
			sb.WriteRune(r)
		default:
			sb.WriteByte('-')
		}
	}
	name := sb.String()
	if name == "" || name[0] == '-' {
		name = "c" + name
	}
	return name
}

// ValidateManagementCluster checks a management-cluster identity: empty,
// or at most 63 characters of [A-Za-z0-9_.-] (a UID, a name), so that it is
// a plain Docker label value and filter.
func ValidateManagementCluster(id string) error {
	if len(id) > maxNameLength {
		return fmt.Errorf("management cluster identity %q is longer than %d characters", id, maxNameLength)
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return fmt.Errorf("management cluster identity %q has a character other than [A-Za-z0-9_.-]", id)
		}
	}
	return nil
}

// ownLabels are the labels of everything the backend creates: its
// management cluster's identity, when it has one.
func (b *Backend) ownLabels() map[string]string {
	l := map[string]string{}
	if b.identity != "" {
		l[LabelManagementCluster] = b.identity
	}
	return l
}

// clusterLabels are the labels of every container of the cluster, and what
// finds them: only this management cluster's.
func (b *Backend) clusterLabels(cluster backend.ClusterRef) map[string]string {
	l := b.ownLabels()
	l[v1alpha1.DockerLabelClusterNamespace] = cluster.Namespace
	l[v1alpha1.DockerLabelClusterName] = cluster.Name
	return l
}

// containerNames are the names a container of parts is created under: the
// plain name, and when another container holds it (another management
// cluster's with the same namespace and names, or a user's) a name ended
// with a hash of the parts and this backend's identity, so that every
// management cluster has a fallback of its own.
func (b *Backend) containerNames(parts ...string) []string {
	return []string{containerName(parts...), hashedName(append(slices.Clone(parts), b.identity)...)}
}

// labelFilters makes the list filters matching every one of labels.
func labelFilters(labels map[string]string) client.Filters {
	f := make(client.Filters)
	for k, v := range labels {
		f.Add("label", k+"="+v)
	}
	return f
}

// listContainers lists the containers, running or not, carrying every one
// of labels, oldest first.
func (b *Backend) listContainers(ctx context.Context, labels map[string]string) ([]container.Summary, error) {
	res, err := b.client.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: labelFilters(labels)})
	if err != nil {
		return nil, fmt.Errorf("failed to list containers: %w", err)
	}
	items := res.Items
	slices.SortFunc(items, func(a, b container.Summary) int {
		if a.Created != b.Created {
			if a.Created < b.Created {
				return -1
			}
			return 1
		}
		return strings.Compare(a.ID, b.ID)
	})
	return items, nil
}

// inspect returns a container's state; a missing container is an error
// cerrdefs.IsNotFound recognises.
func (b *Backend) inspect(ctx context.Context, idOrName string) (container.InspectResponse, error) {
	res, err := b.client.ContainerInspect(ctx, idOrName, client.ContainerInspectOptions{})
	if err != nil {
		return container.InspectResponse{}, fmt.Errorf("failed to inspect container %s: %w", idOrName, err)
	}
	return res.Container, nil
}

// ensureRunning starts a container that is not running (created by a
// manager that stopped before starting it, or stopped by a Docker restart
// without a restart policy) and returns its fresh state.
func (b *Backend) ensureRunning(ctx context.Context, c container.InspectResponse) (container.InspectResponse, error) {
	if c.State != nil && c.State.Running {
		return c, nil
	}
	if _, err := b.client.ContainerStart(ctx, c.ID, client.ContainerStartOptions{}); err != nil {
		return c, fmt.Errorf("failed to start container %s: %w", containerNameOf(c), err)
	}
	return b.inspect(ctx, c.ID)
}

// removeContainer removes a container and its anonymous volumes; a
// container already gone is not an error.
func (b *Backend) removeContainer(ctx context.Context, id string) error {
	_, err := b.client.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	if err != nil && !cerrdefs.IsNotFound(err) {
		// A removal already under way (two deletions racing) ends the same.
		if cerrdefs.IsConflict(err) && strings.Contains(err.Error(), "already in progress") {
			return nil
		}
		return fmt.Errorf("failed to remove container %s: %w", id, err)
	}
	return nil
}

// createContainer creates a container, pulling its image first when the
// daemon does not have it.
func (b *Backend) createContainer(ctx context.Context, opts client.ContainerCreateOptions) (string, error) {
	res, err := b.client.ContainerCreate(ctx, opts)
	if err != nil && cerrdefs.IsNotFound(err) && strings.Contains(strings.ToLower(err.Error()), "image") {
		if pullErr := b.pull(ctx, opts.Config.Image); pullErr != nil {
			return "", fmt.Errorf("image %s is not on the Docker host and pulling it failed: %w", opts.Config.Image, pullErr)
		}
		res, err = b.client.ContainerCreate(ctx, opts)
	}
	if err != nil {
		return "", err
	}
	return res.ID, nil
}

func (b *Backend) pull(ctx context.Context, image string) error {
	resp, err := b.client.ImagePull(ctx, image, client.ImagePullOptions{})
	if err != nil {
		return err
	}
	defer func() { _ = resp.Close() }()
	return resp.Wait(ctx)
}

// nameOwnerWait bounds how long a taken container name may stay unknown
// to inspect: Docker reserves a name before the container is listed.
const nameOwnerWait = 10 * time.Second

// createOrAdopt creates a container under the first name of names that is
// free, and returns its ID. A name already taken by a container that mine
// accepts (the same node, made by another manager or an earlier call that
// seemed to fail) is adopted instead: no second container is ever made for
// one purpose. A name taken by anything else moves on to the next name.
func (b *Backend) createOrAdopt(ctx context.Context, names []string, opts func(name string) client.ContainerCreateOptions, mine func(labels map[string]string) bool) (string, error) {
	var err error
	for _, name := range names {
		var id string
		id, err = b.createContainer(ctx, opts(name))
		if err == nil {
			return id, nil
		}
		if !cerrdefs.IsConflict(err) {
			return "", err
		}
		owner, ownerErr := b.waitForName(ctx, name)
		if ownerErr != nil {
			return "", fmt.Errorf("container name %s is taken: %w", name, ownerErr)
		}
		if owner.Config != nil && mine(owner.Config.Labels) {
			return owner.ID, nil
		}
	}
	return "", err
}

// waitForName inspects the container of a name that was reported taken,
// waiting for the daemon to finish creating it.
func (b *Backend) waitForName(ctx context.Context, name string) (container.InspectResponse, error) {
	ticker := time.NewTicker(100 * time.Millisecond)
	defer ticker.Stop()
	deadline := time.After(nameOwnerWait)
	for {
		c, err := b.inspect(ctx, name)
		if err == nil || !cerrdefs.IsNotFound(err) {
			return c, err
		}
		select {
		case <-ctx.Done():
			return c, ctx.Err()
		case <-deadline:
			return c, err
		case <-ticker.C:
		}
	}
}

// hasLabels reports whether labels include every one of want.
func hasLabels(labels, want map[string]string) bool {
	for k, v := range want {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// containerNameOf is a container's name without Docker's leading slash.
func containerNameOf(c container.InspectResponse) string {
	return strings.TrimPrefix(c.Name, "/")
}

// addressOn is the container's IPv4 (else IPv6) address on network.
func addressOn(c container.InspectResponse, network string) netip.Addr {
	if c.NetworkSettings == nil {
		return netip.Addr{}
	}
	ep, ok := c.NetworkSettings.Networks[network]
	if !ok || ep == nil {
		return netip.Addr{}
	}
	if ep.IPAddress.IsValid() {
		return ep.IPAddress
	}
	return ep.GlobalIPv6Address
}

// errNotRunning reports a container that should run and does not.
var errNotRunning = errors.New("container is not running")
