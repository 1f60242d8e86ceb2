package docker

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
)

// Load balancers and nodes share a network, and Docker hands a container
// started without a static address any free address of the network. A load
// balancer's address is the cluster's endpoint and must survive the load
// balancer being stopped (a `docker kill`, a Docker restart): if a node
// started meanwhile took it, the load balancer could not start again. So a
// network this backend creates gives Docker only the upper half of its
// subnet for dynamic addresses (its IPRange), and load balancers take
// static addresses from the lower half, which no dynamically addressed
// container can take.

// dynamicRange is the upper half of an IPv4 subnet, the part Docker hands
// out dynamically; invalid for subnets too small to split (fewer than 8
// addresses) and for IPv6.
func dynamicRange(subnet netip.Prefix) netip.Prefix {
	if !subnet.Addr().Is4() || subnet.Bits() > 29 {
		return netip.Prefix{}
	}
	base := subnet.Masked().Addr().As4()
	n := uint32(base[0])<<24 | uint32(base[1])<<16 | uint32(base[2])<<8 | uint32(base[3])
	n += 1 << (31 - subnet.Bits())
	mid := netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)})
	return netip.PrefixFrom(mid, subnet.Bits()+1)
}

// staticRange returns the subnet of the network whose lower half is kept
// for static addresses, and its dynamic range; ok is false for a network
// without one (not created by this backend, or created before it kept one).
func (n networkInfo) staticRange() (subnet, dynamic netip.Prefix, gateway netip.Addr, ok bool) {
	for _, r := range n.Ranges {
		if r.Subnet.Addr().Is4() && r.IPRange.IsValid() && r.IPRange == dynamicRange(r.Subnet) {
			return r.Subnet, r.IPRange, r.Gateway, true
		}
	}
	return netip.Prefix{}, netip.Prefix{}, netip.Addr{}, false
}

// freeStaticAddress returns the lowest address of the network's static
// half that no container holds: not the subnet's own address, not its
// gateway, not an address of a container on the network, running or
// stopped with a static address.
func (b *Backend) freeStaticAddress(ctx context.Context, n networkInfo) (netip.Addr, error) {
	subnet, dynamic, gateway, ok := n.staticRange()
	if !ok {
		return netip.Addr{}, nil
	}
	taken, err := b.takenAddresses(ctx, n)
	if err != nil {
		return netip.Addr{}, err
	}
	for a := subnet.Masked().Addr().Next(); a.IsValid() && a.Less(dynamic.Addr()); a = a.Next() {
		if a != gateway && !taken[a] {
			return a, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("no free static address left in %s of Docker network %s (the lower half of %s)", subnet, n.Name, subnet)
}

// takenAddresses are the addresses on the network of its containers: the
// running ones' (the network's endpoints) and the static ones of stopped
// containers, which Docker gives them back when they start.
func (b *Backend) takenAddresses(ctx context.Context, n networkInfo) (map[netip.Addr]bool, error) {
	taken := map[netip.Addr]bool{}
	ins, err := b.client.NetworkInspect(ctx, n.ID, client.NetworkInspectOptions{})
	if err != nil {
		return nil, fmt.Errorf("failed to inspect network %s: %w", n.Name, err)
	}
	for _, ep := range ins.Network.Containers {
		if ep.IPv4Address.IsValid() {
			taken[ep.IPv4Address.Addr()] = true
		}
	}
	list, err := b.client.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("network", n.ID)})
	if err != nil {
		return nil, fmt.Errorf("failed to list the containers of network %s: %w", n.Name, err)
	}
	for _, s := range list.Items {
		if s.State == container.StateRunning {
			continue
		}
		c, err := b.inspect(ctx, s.ID)
		if err != nil {
			return nil, err
		}
		if c.NetworkSettings == nil {
			continue
		}
		if ep := c.NetworkSettings.Networks[n.Name]; ep != nil && ep.IPAMConfig != nil && ep.IPAMConfig.IPv4Address.IsValid() {
			taken[ep.IPAMConfig.IPv4Address] = true
		}
	}
	return taken, nil
}
