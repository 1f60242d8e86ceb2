package docker

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/infra/internal/backend"
)

// networkInfo is what the backend needs of a network.
type networkInfo struct {
	ID      string
	Name    string
	Subnets []netip.Prefix
	// Ranges are the network's IPAM configurations with a subnet.
	Ranges []network.IPAMConfig
}

// contains reports whether one of the network's subnets holds addr.
func (n networkInfo) contains(addr netip.Addr) bool {
	for _, p := range n.Subnets {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

func toNetworkInfo(n network.Network) networkInfo {
	info := networkInfo{ID: n.ID, Name: n.Name}
	for _, c := range n.IPAM.Config {
		if c.Subnet.IsValid() {
			info.Subnets = append(info.Subnets, c.Subnet)
			info.Ranges = append(info.Ranges, c)
		}
	}
	return info
}

// findNetwork returns the network named name, found=false when there is
// none. Docker 20.10 lets two networks share a name (API clients that do
// not send CheckDuplicate, this one included); the oldest wins, as it is
// the one the first containers joined.
func (b *Backend) findNetwork(ctx context.Context, name string) (network.Network, bool, error) {
	res, err := b.client.NetworkList(ctx, client.NetworkListOptions{Filters: make(client.Filters).Add("name", name)})
	if err != nil {
		return network.Network{}, false, fmt.Errorf("failed to list networks: %w", err)
	}
	var found []network.Network
	for _, n := range res.Items {
		// The name filter matches substrings.
		if n.Name == name {
			found = append(found, n.Network)
		}
	}
	if len(found) == 0 {
		return network.Network{}, false, nil
	}
	slices.SortFunc(found, func(a, b network.Network) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return found[0], true, nil
}

// ensureNetwork returns the network named name, creating it when missing.
//
// A created network gets an explicit subnet, because Docker accepts static
// container addresses only on networks with a user-configured subnet. The
// subnet is the one Docker's own allocator picks (create, read, recreate
// with it), so that it does not collide with the host's other networks.
// Of an IPv4 subnet, only the upper half is Docker's to hand out
// dynamically: the lower half is kept for load balancers' static addresses
// (see addresses.go).
func (b *Backend) ensureNetwork(ctx context.Context, name string, creator backend.ClusterRef) (networkInfo, error) {
	// The webhook rejects these; re-checked here for objects that bypassed
	// it (webhooks off, or created before the check existed). Terminal: no
	// retry makes the name acceptable.
	if v1alpha1.IsReservedDockerNetwork(name) {
		return networkInfo{}, reconcile.TerminalError(fmt.Errorf("docker network %q is one of Docker's predefined networks (%s) and cannot hold a cluster", name, strings.Join(v1alpha1.ReservedDockerNetworks, ", ")))
	}
	b.networkLock.Lock()
	defer b.networkLock.Unlock()

	n, found, err := b.findNetwork(ctx, name)
	if err != nil {
		return networkInfo{}, err
	}
	if found {
		return toNetworkInfo(n), nil
	}

	log := ctrl.LoggerFrom(ctx)
	log.Info("Creating Docker network", "network", name)
	labels := b.clusterLabels(creator)
	labels[LabelCreatedBy] = CreatedByValue
	probe, err := b.createNetwork(ctx, name, labels, nil)
	if err != nil {
		return networkInfo{}, err
	}
	var ipam *network.IPAM
	for _, c := range probe.IPAM.Config {
		if !c.Subnet.IsValid() {
			continue
		}
		if ipam == nil {
			ipam = &network.IPAM{Driver: "default"}
		}
		ipam.Config = append(ipam.Config, network.IPAMConfig{Subnet: c.Subnet, Gateway: c.Gateway, IPRange: dynamicRange(c.Subnet)})
	}
	if ipam == nil {
		// Nothing to pin: keep what Docker made.
		return toNetworkInfo(probe), nil
	}
	if _, err := b.client.NetworkRemove(ctx, probe.ID, client.NetworkRemoveOptions{}); err != nil {
		return networkInfo{}, fmt.Errorf("failed to recreate network %s with a fixed subnet: %w", name, err)
	}
	created, err := b.createNetwork(ctx, name, labels, ipam)
	if err != nil {
		return networkInfo{}, err
	}
	return toNetworkInfo(created), nil
}

// createNetwork creates a bridge network and returns it. When a network of
// that name appeared meanwhile (another manager), the new one is removed
// again and the existing one returned.
func (b *Backend) createNetwork(ctx context.Context, name string, labels map[string]string, ipam *network.IPAM) (network.Network, error) {
	res, err := b.client.NetworkCreate(ctx, name, client.NetworkCreateOptions{
		Driver: "bridge",
		IPAM:   ipam,
		Labels: labels,
	})
	if err != nil {
		if cerrdefs.IsConflict(err) {
			return b.existingNetwork(ctx, name)
		}
		return network.Network{}, fmt.Errorf("failed to create network %s: %w", name, err)
	}
	oldest, found, err := b.findNetwork(ctx, name)
	if err != nil {
		return network.Network{}, err
	}
	if found && oldest.ID != res.ID {
		if _, err := b.client.NetworkRemove(ctx, res.ID, client.NetworkRemoveOptions{}); err != nil && !cerrdefs.IsNotFound(err) {
			return network.Network{}, fmt.Errorf("failed to remove duplicate network %s: %w", name, err)
		}
		return oldest, nil
	}
	ins, err := b.client.NetworkInspect(ctx, res.ID, client.NetworkInspectOptions{})
	if err != nil {
		return network.Network{}, fmt.Errorf("failed to inspect network %s: %w", name, err)
	}
	return ins.Network.Network, nil
}

func (b *Backend) existingNetwork(ctx context.Context, name string) (network.Network, error) {
	n, found, err := b.findNetwork(ctx, name)
	if err != nil {
		return network.Network{}, err
	}
	if !found {
		return network.Network{}, fmt.Errorf("network %s was reported to exist but was not found", name)
	}
	return n, nil
}

// removeNetworkIfUnused removes a network the backend created once no
// container is attached to it. Networks made by others (kind's, a user's,
// another management cluster's backend) are never removed.
func (b *Backend) removeNetworkIfUnused(ctx context.Context, id string) error {
	b.networkLock.Lock()
	defer b.networkLock.Unlock()

	ins, err := b.client.NetworkInspect(ctx, id, client.NetworkInspectOptions{})
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("failed to inspect network %s: %w", id, err)
	}
	// Another management cluster's network is its to remove.
	if !hasLabels(ins.Network.Labels, b.ownLabels()) || ins.Network.Labels[LabelCreatedBy] != CreatedByValue || len(ins.Network.Containers) > 0 {
		return nil
	}
	ctrl.LoggerFrom(ctx).Info("Removing Docker network", "network", ins.Network.Name)
	if _, err := b.client.NetworkRemove(ctx, id, client.NetworkRemoveOptions{}); err != nil {
		// A container joined meanwhile (another cluster): the network stays.
		if cerrdefs.IsNotFound(err) || strings.Contains(err.Error(), "active endpoints") {
			return nil
		}
		return fmt.Errorf("failed to remove network %s: %w", ins.Network.Name, err)
	}
	return nil
}

// checkStaticAddresses maps the node's static addresses on one IPv4 and one
// IPv6 address of the network, which must contain them.
func checkStaticAddresses(n networkInfo, addrs []backend.StaticAddress) (v4, v6 netip.Addr, err error) {
	for _, a := range addrs {
		if !a.Address.IsValid() {
			return v4, v6, fmt.Errorf("static address is not a valid IP address")
		}
		addr := a.Address.Unmap()
		if !n.contains(addr) {
			return v4, v6, fmt.Errorf("static address %s is outside the subnets %v of Docker network %s: the IP pool and the network must match", addr, n.Subnets, n.Name)
		}
		switch {
		case addr.Is4() && !v4.IsValid():
			v4 = addr
		case addr.Is6() && !v6.IsValid():
			v6 = addr
		default:
			return v4, v6, fmt.Errorf("static address %s: a Docker container has at most one IPv4 and one IPv6 address on a network", addr)
		}
	}
	return v4, v6, nil
}
