package allocator

import (
	"math"
	"math/big"
	"net/netip"
	"slices"

	"go4.org/netipx"
)

// Pool is a parsed, validated pool: the addresses that may be handed out.
// It is immutable and safe to share.
type Pool struct {
	subnet   netip.Prefix
	gateway  netip.Addr
	set      *netipx.IPSet
	excluded *netipx.IPSet
	reserved []netip.Addr
	size     *big.Int
}

// Family returns 4 or 6.
func (p *Pool) Family() int {
	if p.subnet.Addr().Is4() {
		return 4
	}
	return 6
}

// Subnet is the network the pool's addresses live in, as handed to hosts
// together with each address.
func (p *Pool) Subnet() netip.Prefix { return p.subnet }

// Gateway returns the gateway, or the zero Addr when the spec has none.
func (p *Pool) Gateway() netip.Addr { return p.gateway }

// Contains reports whether addr may be handed out: it is in the pool's
// addresses and neither excluded nor reserved.
func (p *Pool) Contains(addr netip.Addr) bool {
	// IPSet orders IPv4 before IPv6, so an IPv4-mapped IPv6 address would
	// simply not be found; checking the family keeps that explicit.
	return addr.BitLen() == p.subnet.Addr().BitLen() && p.set.Contains(addr)
}

// Size returns the number of allocatable addresses. The result is a copy.
func (p *Pool) Size() *big.Int { return new(big.Int).Set(p.size) }

// SizeInt64 returns Size capped at math.MaxInt64, for places (metrics,
// status fields) that cannot hold an IPv6-sized number.
func (p *Pool) SizeInt64() (n int64, capped bool) { return capInt64(p.size) }

// IPSet returns the allocatable addresses. IPSets are immutable, so the
// pool's own set is returned.
func (p *Pool) IPSet() *netipx.IPSet { return p.set }

// whyNotAllocatable turns a Contains miss into words for error messages.
func (p *Pool) whyNotAllocatable(addr netip.Addr) string {
	switch {
	case !addr.IsValid():
		return "is not a valid address"
	case addr.BitLen() != p.subnet.Addr().BitLen():
		return "is not an " + familyName(p.subnet.Addr().BitLen()) + " address"
	case addr == p.gateway:
		return "is the gateway"
	case slices.Contains(p.reserved, addr):
		return "is a reserved address (network, broadcast or anycast)"
	case p.excluded.Contains(addr):
		return "is excluded"
	default:
		return "is outside the pool's addresses"
	}
}

func capInt64(n *big.Int) (int64, bool) {
	if n.IsInt64() {
		return n.Int64(), false
	}
	return math.MaxInt64, true
}
