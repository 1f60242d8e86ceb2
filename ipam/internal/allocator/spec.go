package allocator

import (
	"errors"
	"fmt"
	"math/big"
	"net/netip"
	"strings"

	"go4.org/netipx"
)

// Spec is the address part of an in-cluster IP pool, as written by the user.
type Spec struct {
	// Addresses are single IPs ("10.0.0.5"), inclusive ranges
	// ("10.0.0.5-10.0.0.9") or CIDRs ("10.0.0.0/28"), all inside the subnet
	// given by the first entry and Prefix.
	Addresses []string
	// Prefix is the length of the subnet the addresses live in.
	Prefix int
	// Gateway, if set, must be inside the subnet and is never handed out.
	Gateway string
	// ExcludedAddresses use the same syntax as Addresses and are never
	// handed out.
	ExcludedAddresses []string
	// AllocateReservedIPAddresses allows handing out the network, broadcast
	// and subnet-router anycast addresses.
	AllocateReservedIPAddresses bool
}

// Parse errors. Each one reaches the caller wrapped in a *FieldError that
// names the offending entry, so errors.Is works on the joined result.
var (
	ErrNoAddresses          = errors.New("at least one address, range or CIDR is required")
	ErrInvalidEntry         = errors.New("not a valid IP address, range (a-b) or CIDR")
	ErrReversedRange        = errors.New("range start is after range end")
	ErrMixedFamilies        = errors.New("IPv4 and IPv6 cannot be mixed in one pool")
	ErrPrefixOutOfRange     = errors.New("prefix out of range")
	ErrOutsideSubnet        = errors.New("entry is not inside the pool subnet")
	ErrGatewayOutsideSubnet = errors.New("gateway is not inside the pool subnet")
	ErrNothingAllocatable   = errors.New("no address is left to hand out once excluded, reserved and gateway addresses are taken away")
)

// FieldError ties a parse error to the spec field and entry that caused it,
// so the webhook can report it against the right field path.
type FieldError struct {
	// Field is the spec field: "addresses", "excludedAddresses", "gateway"
	// or "prefix".
	Field string
	// Index is the position in a list field, or -1.
	Index int
	// Value is the entry as written by the user; empty when the problem is
	// not with a single entry.
	Value string
	Err   error
}

func (e *FieldError) Error() string {
	switch {
	case e.Index >= 0:
		return fmt.Sprintf("%s[%d] %q: %v", e.Field, e.Index, e.Value, e.Err)
	case e.Value != "":
		return fmt.Sprintf("%s %q: %v", e.Field, e.Value, e.Err)
	default:
		return fmt.Sprintf("%s: %v", e.Field, e.Err)
	}
}

func (e *FieldError) Unwrap() error { return e.Err }

// entry is one parsed list item, remembered with its position so later
// checks can still name it.
type entry struct {
	index int
	value string
	r     netipx.IPRange
}

// Parse validates spec and computes the set of allocatable addresses.
//
// Every problem is reported, not just the first: the error is an
// errors.Join of *FieldError values.
func Parse(spec Spec) (*Pool, error) {
	var errs []error
	fail := func(field string, index int, value string, err error) {
		errs = append(errs, &FieldError{Field: field, Index: index, Value: value, Err: err})
	}

	if len(spec.Addresses) == 0 {
		fail("addresses", -1, "", ErrNoAddresses)
	}
	addrs := parseList("addresses", spec.Addresses, fail)
	excluded := parseList("excludedAddresses", spec.ExcludedAddresses, fail)
	var gateway netip.Addr
	if g := strings.TrimSpace(spec.Gateway); g != "" {
		var err error
		if gateway, err = parseAddr(g); err != nil {
			fail("gateway", -1, spec.Gateway, err)
		}
	}

	// The first address entry decides the family; without one, the gateway
	// is the only other hint of what the user meant.
	bits := 0
	switch {
	case len(addrs) > 0:
		bits = addrs[0].r.From().BitLen()
	case gateway.IsValid():
		bits = gateway.BitLen()
	}
	sameFamily := func(field string, list []entry) []entry {
		kept := list[:0]
		for _, e := range list {
			if got := e.r.From().BitLen(); got != bits {
				fail(field, e.index, e.value, fmt.Errorf("%w: %s entry in an %s pool", ErrMixedFamilies, familyName(got), familyName(bits)))
				continue
			}
			kept = append(kept, e)
		}
		return kept
	}
	var subnet netip.Prefix
	if bits != 0 {
		addrs = sameFamily("addresses", addrs)
		excluded = sameFamily("excludedAddresses", excluded)
		if gateway.IsValid() && gateway.BitLen() != bits {
			fail("gateway", -1, spec.Gateway, fmt.Errorf("%w: %s gateway in an %s pool", ErrMixedFamilies, familyName(gateway.BitLen()), familyName(bits)))
			gateway = netip.Addr{}
		}
		if spec.Prefix == 0 {
			// A /0 "subnet" is the whole address space: never a network a
			// host can be configured with.
			fail("prefix", -1, "", fmt.Errorf("%w: 0 is not a usable subnet; use 1 to %d for %s", ErrPrefixOutOfRange, bits, familyName(bits)))
		} else if spec.Prefix < 0 || spec.Prefix > bits {
			fail("prefix", -1, "", fmt.Errorf("%w: %d is not between 0 and %d for %s", ErrPrefixOutOfRange, spec.Prefix, bits, familyName(bits)))
		} else if len(addrs) > 0 {
			// Cannot fail: the family matches and the prefix is in range.
			subnet, _ = addrs[0].r.From().Prefix(spec.Prefix)
		}
	}
	if subnet.IsValid() {
		for _, e := range addrs {
			if !subnet.Contains(e.r.From()) || !subnet.Contains(e.r.To()) {
				fail("addresses", e.index, e.value, fmt.Errorf("%w %s", ErrOutsideSubnet, subnet))
			}
		}
		if gateway.IsValid() && !subnet.Contains(gateway) {
			fail("gateway", -1, spec.Gateway, fmt.Errorf("%w %s", ErrGatewayOutsideSubnet, subnet))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	pool, err := newPool(subnet, gateway, addrs, excluded, spec.AllocateReservedIPAddresses)
	if err != nil {
		return nil, err
	}
	if pool.size.Sign() == 0 {
		return nil, errors.Join(&FieldError{Field: "addresses", Index: -1, Err: ErrNothingAllocatable})
	}
	return pool, nil
}

func newPool(subnet netip.Prefix, gateway netip.Addr, addrs, excluded []entry, allocateReserved bool) (*Pool, error) {
	var exb, b netipx.IPSetBuilder
	for _, e := range excluded {
		exb.AddRange(e.r)
	}
	exSet, err := exb.IPSet()
	if err != nil {
		return nil, fmt.Errorf("building excluded addresses of %s: %w", subnet, err)
	}
	for _, e := range addrs {
		b.AddRange(e.r)
	}
	b.RemoveSet(exSet)
	reserved := reservedAddrs(subnet, gateway, allocateReserved)
	for _, a := range reserved {
		b.Remove(a)
	}
	set, err := b.IPSet()
	if err != nil {
		return nil, fmt.Errorf("building allocatable addresses of %s: %w", subnet, err)
	}
	size := new(big.Int)
	for _, r := range set.Ranges() {
		size.Add(size, rangeSize(r))
	}
	return &Pool{
		subnet:   subnet,
		gateway:  gateway,
		set:      set,
		excluded: exSet,
		reserved: reserved,
		size:     size,
	}, nil
}

// reservedAddrs lists the addresses that hosts must not get: the gateway
// always, since it belongs to the router whatever the reserved flag says,
// and the network, IPv4 broadcast and IPv6 subnet-router anycast addresses
// unless the user asked for them.
func reservedAddrs(subnet netip.Prefix, gateway netip.Addr, allocateReserved bool) []netip.Addr {
	var out []netip.Addr
	if gateway.IsValid() {
		out = append(out, gateway)
	}
	// Point-to-point (/31, /127) and single-host subnets have no room for a
	// network or broadcast address; RFC 3021 makes every address a host.
	if allocateReserved || subnet.Addr().BitLen()-subnet.Bits() < 2 {
		return out
	}
	// In IPv6 the network address is the subnet-router anycast address.
	out = append(out, subnet.Addr())
	if subnet.Addr().Is4() {
		out = append(out, netipx.PrefixLastIP(subnet))
	}
	return out
}

func parseList(field string, values []string, fail func(string, int, string, error)) []entry {
	out := make([]entry, 0, len(values))
	for i, v := range values {
		r, err := parseEntry(v)
		if err != nil {
			fail(field, i, v, err)
			continue
		}
		out = append(out, entry{index: i, value: v, r: r})
	}
	return out
}

// parseEntry accepts "a", "a-b" (with optional spaces around the dash) and
// "a/n". A CIDR with host bits set stands for its whole network, which is
// what a user writing "10.0.0.1/24" in an address list most likely means.
func parseEntry(s string) (netipx.IPRange, error) {
	s = strings.TrimSpace(s)
	if fromStr, toStr, ok := strings.Cut(s, "-"); ok {
		from, err := parseAddr(strings.TrimSpace(fromStr))
		if err != nil {
			return netipx.IPRange{}, err
		}
		to, err := parseAddr(strings.TrimSpace(toStr))
		if err != nil {
			return netipx.IPRange{}, err
		}
		if from.BitLen() != to.BitLen() {
			return netipx.IPRange{}, fmt.Errorf("%w: range from %s to %s", ErrMixedFamilies, familyName(from.BitLen()), familyName(to.BitLen()))
		}
		if to.Less(from) {
			return netipx.IPRange{}, fmt.Errorf("%w: %s > %s", ErrReversedRange, from, to)
		}
		return netipx.IPRangeFrom(from, to), nil
	}
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netipx.IPRange{}, fmt.Errorf("%w: %w", ErrInvalidEntry, err)
		}
		return netipx.RangeOfPrefix(p.Masked()), nil
	}
	a, err := parseAddr(s)
	if err != nil {
		return netipx.IPRange{}, err
	}
	return netipx.IPRangeFrom(a, a), nil
}

func parseAddr(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("%w: %w", ErrInvalidEntry, err)
	}
	// Zones name a local interface; they mean nothing in a shared pool and
	// would make equal addresses compare unequal.
	if a.Zone() != "" {
		return netip.Addr{}, fmt.Errorf("%w: IPv6 zones are not allowed", ErrInvalidEntry)
	}
	return a, nil
}

func familyName(bits int) string {
	if bits == 32 {
		return "IPv4"
	}
	return "IPv6"
}

func rangeSize(r netipx.IPRange) *big.Int {
	from := new(big.Int).SetBytes(r.From().AsSlice())
	n := new(big.Int).SetBytes(r.To().AsSlice())
	n.Sub(n, from)
	return n.Add(n, big.NewInt(1))
}
