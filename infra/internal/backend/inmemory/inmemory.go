// Package inmemory is the infra module's backend that needs no Docker: it
// simulates a cluster's load balancer and its nodes in memory, with
// configurable delays, so that Cluster API's controllers can be exercised at
// scale on any machine.
//
// Nothing it reports depends on memory that a restart loses: provider IDs
// and the endpoint derive from names, a node's address from its static
// addresses or, failing those, from a hash of its name within the cluster's
// node CIDR. A restarted manager therefore reports the same nodes; only the
// simulated delays start again.
package inmemory

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"net/netip"
	"sync"
	"time"

	"go4.org/netipx"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/infra/internal/backend"
	"github.com/capi-monolith/capi-monolith/infra/internal/workload/hosting"
	"github.com/capi-monolith/capi-monolith/infra/internal/workload/kubeadm"
)

// APIServerPort is the port of the simulated control plane endpoint.
const APIServerPort = 6443

// Options configure the backend. The zero value uses the system clock and
// serves no workload API.
type Options struct {
	// Now replaces time.Now, for tests.
	Now func() time.Time
	// Workload serves the clusters' workload API. Nil: clusters get a
	// simulated endpoint that nothing answers, and nodes register nowhere.
	Workload *hosting.Hosting
}

// Backend is the in-memory backend; safe for concurrent use.
type Backend struct {
	now      func() time.Time
	workload *hosting.Hosting

	mu sync.Mutex
	// created remembers when each node was first asked for, to simulate
	// its provisioning delay.
	created map[backend.MachineRef]time.Time
	// bootstrapDelays are the nodes' simulated bootstrap durations.
	bootstrapDelays map[backend.MachineRef]time.Duration
	// zones are the failure domains the nodes were placed in when first
	// asked for; a node keeps its zone (a restart places it again from the
	// spec, which names the same domain).
	zones map[backend.MachineRef]string
	// addrs holds each cluster's hash-derived node addresses, so that two
	// nodes whose hashes collide still get distinct addresses.
	addrs map[backend.ClusterRef]map[netip.Addr]string
	// bootstraps are what the nodes' bootstrap data said (nil: not
	// kubeadm), read when it ran or, after a restart, when the node is
	// registered again.
	bootstraps map[backend.MachineRef]*kubeadm.Bootstrap
}

var (
	_ backend.Backend             = &Backend{}
	_ backend.ProviderIDPredictor = &Backend{}
	_ backend.QuickBootstrapper   = &Backend{}
)

// New returns an empty in-memory backend.
func New(opts Options) *Backend {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Backend{
		now:             opts.Now,
		workload:        opts.Workload,
		created:         map[backend.MachineRef]time.Time{},
		bootstrapDelays: map[backend.MachineRef]time.Duration{},
		zones:           map[backend.MachineRef]string{},
		addrs:           map[backend.ClusterRef]map[netip.Addr]string{},
		bootstraps:      map[backend.MachineRef]*kubeadm.Bootstrap{},
	}
}

// ProviderID returns the provider ID of a node.
func ProviderID(m backend.MachineRef) string {
	return fmt.Sprintf("inmemory://%s/%s", m.Cluster.Namespace, m.Name)
}

// PredictProviderID implements backend.ProviderIDPredictor: the provider
// ID depends on the machine's name alone.
func (b *Backend) PredictProviderID(m backend.MachineRef) string {
	return ProviderID(m)
}

// BootstrapIsQuick implements backend.QuickBootstrapper: without a
// simulated delay, Bootstrap only parses the data.
func (b *Backend) BootstrapIsQuick(m backend.MachineRef) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.bootstrapDelays[m] <= 0
}

func nodeCIDR(spec string) (netip.Prefix, error) {
	if spec == "" {
		spec = v1alpha1.DefaultInMemoryNodeCIDR
	}
	p, err := netip.ParsePrefix(spec)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("invalid nodeCIDR %q: %w", spec, err)
	}
	if p.Bits() > p.Addr().BitLen()-2 {
		return netip.Prefix{}, fmt.Errorf("nodeCIDR %q has room for no node", spec)
	}
	return p.Masked(), nil
}

// ReconcileCluster implements backend.Cluster: with a workload API, the
// cluster's endpoint is its listener; without, the simulated load balancer
// answers at the first address of the node CIDR.
func (b *Backend) ReconcileCluster(ctx context.Context, spec backend.ClusterSpec) (backend.ClusterStatus, error) {
	if b.workload != nil {
		return b.serveWorkload(ctx, spec)
	}
	if spec.Endpoint.Host != "" {
		return backend.ClusterStatus{Endpoint: spec.Endpoint}, nil
	}
	var cidr string
	if spec.Backend.InMemory != nil {
		cidr = spec.Backend.InMemory.NodeCIDR
	}
	p, err := nodeCIDR(cidr)
	if err != nil {
		return backend.ClusterStatus{}, err
	}
	return backend.ClusterStatus{Endpoint: clusterv1.APIEndpoint{Host: p.Addr().Next().String(), Port: APIServerPort}}, nil
}

// DeleteCluster implements backend.Cluster.
func (b *Backend) DeleteCluster(_ context.Context, cluster backend.ClusterRef) error {
	if b.workload != nil {
		b.workload.Remove(clusterKey(cluster))
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.addrs, cluster)
	for m := range b.created {
		if m.Cluster == cluster {
			delete(b.created, m)
			delete(b.zones, m)
			delete(b.bootstrapDelays, m)
			delete(b.bootstraps, m)
		}
	}
	return nil
}

// ListNodes implements backend.Cluster: the nodes asked for since start.
func (b *Backend) ListNodes(_ context.Context, cluster backend.ClusterRef) ([]backend.MachineRef, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var nodes []backend.MachineRef
	for m := range b.created {
		if m.Cluster == cluster {
			nodes = append(nodes, m)
		}
	}
	return nodes, nil
}

// EnsureNode implements backend.Machine: the node exists once its
// provisioning delay has passed since it was first asked for.
func (b *Backend) EnsureNode(_ context.Context, spec backend.NodeSpec) (backend.Node, error) {
	var delay time.Duration
	b.mu.Lock()
	defer b.mu.Unlock()
	if im := spec.Backend.InMemory; im != nil {
		// Bounded here too, for objects that bypassed the webhook.
		if im.ProvisioningDelay != nil {
			delay = min(max(im.ProvisioningDelay.Duration, 0), v1alpha1.MaxSimulatedDelay)
		}
		if im.BootstrapDelay != nil {
			b.bootstrapDelays[spec.Machine] = min(max(im.BootstrapDelay.Duration, 0), v1alpha1.MaxSimulatedDelay)
		}
	}
	first, ok := b.created[spec.Machine]
	if !ok {
		first = b.now()
		b.created[spec.Machine] = first
		b.zones[spec.Machine] = spec.FailureDomain
	}
	node := backend.Node{
		ProviderID:    ProviderID(spec.Machine),
		Provisioned:   !b.now().Before(first.Add(delay)),
		FailureDomain: b.zones[spec.Machine],
	}

	var addrs []netip.Addr
	for _, s := range spec.StaticAddresses {
		addrs = append(addrs, s.Address)
	}
	if len(addrs) == 0 {
		var cidr string
		if spec.Cluster.InMemory != nil {
			cidr = spec.Cluster.InMemory.NodeCIDR
		}
		a, err := b.hashedAddress(spec.Machine, cidr)
		if err != nil {
			return backend.Node{}, err
		}
		addrs = append(addrs, a)
	}
	for _, a := range addrs {
		node.Addresses = append(node.Addresses, clusterv1.MachineAddress{Type: clusterv1.MachineInternalIP, Address: a.String()})
	}
	node.Addresses = append(node.Addresses, clusterv1.MachineAddress{Type: clusterv1.MachineHostName, Address: spec.Machine.Name})
	return node, nil
}

// hashedAddress derives a node's address from its name, probing past
// collisions with the cluster's other nodes. The network, the simulated
// endpoint (first address) and the broadcast address are skipped.
func (b *Backend) hashedAddress(m backend.MachineRef, cidr string) (netip.Addr, error) {
	p, err := nodeCIDR(cidr)
	if err != nil {
		return netip.Addr{}, err
	}
	taken := b.addrs[m.Cluster]
	if taken == nil {
		taken = map[netip.Addr]string{}
		b.addrs[m.Cluster] = taken
	}
	for a, owner := range taken {
		if owner == m.Name {
			return a, nil
		}
	}
	r := netipx.RangeOfPrefix(p)
	first, last := r.From().Next().Next(), r.To().Prev()
	size := rangeSize(first, last)
	h := fnv.New64a()
	_, _ = h.Write([]byte(m.Name))
	start := h.Sum64() % size
	for i := uint64(0); i < size; i++ {
		a := addOffset(first, (start+i)%size)
		if _, used := taken[a]; !used {
			taken[a] = m.Name
			return a, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("nodeCIDR %s of cluster %s/%s is full", p, m.Cluster.Namespace, m.Cluster.Name)
}

func rangeSize(first, last netip.Addr) uint64 {
	return low64(last) - low64(first) + 1
}

func low64(a netip.Addr) uint64 {
	b := a.As16()
	return binary.BigEndian.Uint64(b[8:])
}

func addOffset(a netip.Addr, off uint64) netip.Addr {
	b := a.As16()
	binary.BigEndian.PutUint64(b[8:], binary.BigEndian.Uint64(b[8:])+off)
	out := netip.AddrFrom16(b)
	if a.Is4() {
		return out.Unmap()
	}
	return out
}

// Bootstrap implements backend.Machine: it simulates running kubeadm
// bootstrap data for the machine's bootstrap delay, and refuses other data
// (parseBootstrap).
func (b *Backend) Bootstrap(ctx context.Context, m backend.MachineRef, data backend.BootstrapData, progress backend.Progress) error {
	if len(data.Value) == 0 {
		return fmt.Errorf("bootstrap data is empty")
	}
	b.mu.Lock()
	delay := b.bootstrapDelays[m]
	b.mu.Unlock()
	boot, err := parseBootstrap(data)
	if err != nil {
		return err
	}
	b.mu.Lock()
	b.bootstraps[m] = boot
	b.mu.Unlock()
	progress(fmt.Sprintf("Running %s (simulated, %s)", describeBootstrap(boot), delay))
	timer := time.NewTimer(delay)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("bootstrap cancelled: %w", ctx.Err())
	}
}

// DeleteNode implements backend.Machine: the node leaves the workload
// cluster too.
func (b *Backend) DeleteNode(ctx context.Context, m backend.MachineRef) error {
	if err := b.unregisterNode(ctx, m); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.created, m)
	delete(b.bootstrapDelays, m)
	delete(b.zones, m)
	delete(b.bootstraps, m)
	for a, owner := range b.addrs[m.Cluster] {
		if owner == m.Name {
			delete(b.addrs[m.Cluster], a)
		}
	}
	return nil
}
