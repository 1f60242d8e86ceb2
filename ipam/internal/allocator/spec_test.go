package allocator

import (
	"errors"
	"math"
	"math/big"
	"net/netip"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"go4.org/netipx"
)

func TestParseRejectsBadSpecs(t *testing.T) {
	tests := []struct {
		name    string
		spec    Spec
		wantErr error
		wantMsg string
	}{
		{
			name:    "empty addresses are rejected",
			spec:    Spec{Prefix: 24},
			wantErr: ErrNoAddresses,
			wantMsg: "addresses: at least one address",
		},
		{
			name:    "unparsable address is rejected by position and value",
			spec:    Spec{Addresses: []string{"10.0.0.1", "10.0.0.x"}, Prefix: 24},
			wantErr: ErrInvalidEntry,
			wantMsg: `addresses[1] "10.0.0.x": not a valid IP address`,
		},
		{
			name:    "empty address entry is rejected",
			spec:    Spec{Addresses: []string{"10.0.0.1", ""}, Prefix: 24},
			wantErr: ErrInvalidEntry,
			wantMsg: `addresses[1] ""`,
		},
		{
			name:    "unparsable CIDR is rejected",
			spec:    Spec{Addresses: []string{"10.0.0.0/33"}, Prefix: 24},
			wantErr: ErrInvalidEntry,
			wantMsg: `addresses[0] "10.0.0.0/33"`,
		},
		{
			name:    "range with an unparsable end is rejected",
			spec:    Spec{Addresses: []string{"10.0.0.1-10.0.0.0/24"}, Prefix: 24},
			wantErr: ErrInvalidEntry,
			wantMsg: `addresses[0] "10.0.0.1-10.0.0.0/24"`,
		},
		{
			name:    "range with an unparsable start is rejected",
			spec:    Spec{Addresses: []string{"10.0.0 - 10.0.0.5"}, Prefix: 24},
			wantErr: ErrInvalidEntry,
			wantMsg: `addresses[0] "10.0.0 - 10.0.0.5": not a valid IP address`,
		},
		{
			name:    "gateway decides the family for the prefix check when no address parses",
			spec:    Spec{Addresses: []string{"bogus"}, Prefix: 40, Gateway: "10.0.0.1"},
			wantErr: ErrPrefixOutOfRange,
			wantMsg: "prefix: prefix out of range: 40 is not between 0 and 32 for IPv4",
		},
		{
			name:    "reversed range is rejected",
			spec:    Spec{Addresses: []string{"10.0.0.9 - 10.0.0.1"}, Prefix: 24},
			wantErr: ErrReversedRange,
			wantMsg: `addresses[0] "10.0.0.9 - 10.0.0.1": range start is after range end`,
		},
		{
			name:    "reversed exclusion range is rejected",
			spec:    Spec{Addresses: []string{"10.0.0.0/24"}, Prefix: 24, ExcludedAddresses: []string{"10.0.0.20-10.0.0.10"}},
			wantErr: ErrReversedRange,
			wantMsg: `excludedAddresses[0] "10.0.0.20-10.0.0.10"`,
		},
		{
			name:    "range spanning both families is rejected",
			spec:    Spec{Addresses: []string{"10.0.0.1-fd00::1"}, Prefix: 24},
			wantErr: ErrMixedFamilies,
			wantMsg: `addresses[0] "10.0.0.1-fd00::1": IPv4 and IPv6 cannot be mixed`,
		},
		{
			name:    "IPv6 address in an IPv4 pool is rejected",
			spec:    Spec{Addresses: []string{"10.0.0.1", "fd00::1"}, Prefix: 24},
			wantErr: ErrMixedFamilies,
			wantMsg: `addresses[1] "fd00::1": IPv4 and IPv6 cannot be mixed in one pool: IPv6 entry in an IPv4 pool`,
		},
		{
			name:    "IPv4 exclusion in an IPv6 pool is rejected",
			spec:    Spec{Addresses: []string{"fd00::/64"}, Prefix: 64, ExcludedAddresses: []string{"fd00::5", "10.0.0.0/24"}},
			wantErr: ErrMixedFamilies,
			wantMsg: `excludedAddresses[1] "10.0.0.0/24"`,
		},
		{
			name:    "IPv6 gateway in an IPv4 pool is rejected",
			spec:    Spec{Addresses: []string{"10.0.0.0/24"}, Prefix: 24, Gateway: "fd00::1"},
			wantErr: ErrMixedFamilies,
			wantMsg: `gateway "fd00::1": IPv4 and IPv6 cannot be mixed in one pool: IPv6 gateway in an IPv4 pool`,
		},
		{
			name:    "unparsable gateway is rejected",
			spec:    Spec{Addresses: []string{"10.0.0.0/24"}, Prefix: 24, Gateway: "10.0.0.256"},
			wantErr: ErrInvalidEntry,
			wantMsg: `gateway "10.0.0.256": not a valid IP address`,
		},
		{
			name:    "IPv4 prefix above 32 is rejected",
			spec:    Spec{Addresses: []string{"10.0.0.1"}, Prefix: 33},
			wantErr: ErrPrefixOutOfRange,
			wantMsg: "prefix: prefix out of range: 33 is not between 0 and 32 for IPv4",
		},
		{
			name:    "negative prefix is rejected",
			spec:    Spec{Addresses: []string{"10.0.0.1"}, Prefix: -1},
			wantErr: ErrPrefixOutOfRange,
			wantMsg: "prefix: prefix out of range: -1 is not between 0 and 32",
		},
		{
			name:    "IPv6 prefix above 128 is rejected",
			spec:    Spec{Addresses: []string{"fd00::1"}, Prefix: 129},
			wantErr: ErrPrefixOutOfRange,
			wantMsg: "prefix: prefix out of range: 129 is not between 0 and 128 for IPv6",
		},
		{
			name:    "address outside the subnet of the first entry is rejected",
			spec:    Spec{Addresses: []string{"10.0.0.0/24", "10.0.1.5"}, Prefix: 24},
			wantErr: ErrOutsideSubnet,
			wantMsg: `addresses[1] "10.0.1.5": entry is not inside the pool subnet 10.0.0.0/24`,
		},
		{
			name:    "range running past the subnet end is rejected",
			spec:    Spec{Addresses: []string{"10.0.0.250-10.0.1.5"}, Prefix: 24},
			wantErr: ErrOutsideSubnet,
			wantMsg: `addresses[0] "10.0.0.250-10.0.1.5": entry is not inside the pool subnet 10.0.0.0/24`,
		},
		{
			name:    "CIDR wider than the subnet is rejected",
			spec:    Spec{Addresses: []string{"10.0.0.0/16"}, Prefix: 24},
			wantErr: ErrOutsideSubnet,
			wantMsg: `addresses[0] "10.0.0.0/16"`,
		},
		{
			name:    "IPv6 address outside the subnet is rejected",
			spec:    Spec{Addresses: []string{"fd00::/120", "fd00::1:1"}, Prefix: 120},
			wantErr: ErrOutsideSubnet,
			wantMsg: `addresses[1] "fd00::1:1": entry is not inside the pool subnet fd00::/120`,
		},
		{
			name:    "gateway outside the subnet is rejected",
			spec:    Spec{Addresses: []string{"10.0.0.0/24"}, Prefix: 24, Gateway: "10.0.1.1"},
			wantErr: ErrGatewayOutsideSubnet,
			wantMsg: `gateway "10.0.1.1": gateway is not inside the pool subnet 10.0.0.0/24`,
		},
		{
			name:    "IPv6 zone is rejected",
			spec:    Spec{Addresses: []string{"fe80::1%eth0"}, Prefix: 64},
			wantErr: ErrInvalidEntry,
			wantMsg: `addresses[0] "fe80::1%eth0": not a valid IP address, range (a-b) or CIDR: IPv6 zones are not allowed`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			pool, err := Parse(tt.spec)
			g.Expect(pool).To(BeNil())
			g.Expect(err).To(MatchError(tt.wantErr))
			g.Expect(err.Error()).To(ContainSubstring(tt.wantMsg))
		})
	}
}

func TestParseReportsEveryBadEntryAtOnce(t *testing.T) {
	g := NewWithT(t)
	_, err := Parse(Spec{
		Addresses:         []string{"10.0.0.0/24", "bogus", "10.0.0.9-10.0.0.1", "10.0.5.1", "fd00::1"},
		Prefix:            24,
		ExcludedAddresses: []string{"10.0.0.5", "nope"},
		Gateway:           "10.9.9.9",
	})
	g.Expect(err).To(HaveOccurred())

	var joined interface{ Unwrap() []error }
	g.Expect(errors.As(err, &joined)).To(BeTrue())
	var fields []string
	for _, e := range joined.Unwrap() {
		var fe *FieldError
		g.Expect(errors.As(e, &fe)).To(BeTrue(), "every joined error is a *FieldError: %v", e)
		fields = append(fields, fe.Error())
	}
	g.Expect(fields).To(ConsistOf(
		ContainSubstring(`addresses[1] "bogus"`),
		ContainSubstring(`addresses[2] "10.0.0.9-10.0.0.1": range start is after range end`),
		ContainSubstring(`addresses[3] "10.0.5.1": entry is not inside`),
		ContainSubstring(`addresses[4] "fd00::1": IPv4 and IPv6`),
		ContainSubstring(`excludedAddresses[1] "nope"`),
		ContainSubstring(`gateway "10.9.9.9": gateway is not inside`),
	))
	for _, sentinel := range []error{ErrInvalidEntry, ErrReversedRange, ErrOutsideSubnet, ErrMixedFamilies, ErrGatewayOutsideSubnet} {
		g.Expect(errors.Is(err, sentinel)).To(BeTrue(), "joined error wraps %v", sentinel)
	}
}

func TestParseComputesAllocatableAddresses(t *testing.T) {
	tests := []struct {
		name       string
		spec       Spec
		wantFamily int
		wantSubnet string
		wantRanges []string
		wantSize   int64
	}{
		{
			name:       "IPv4 /24 loses network, broadcast and gateway",
			spec:       Spec{Addresses: []string{"10.0.0.0/24"}, Prefix: 24, Gateway: "10.0.0.1"},
			wantFamily: 4,
			wantSubnet: "10.0.0.0/24",
			wantRanges: []string{"10.0.0.2-10.0.0.254"},
			wantSize:   253,
		},
		{
			name:       "IPv4 /24 allocating reserved addresses still loses the gateway",
			spec:       Spec{Addresses: []string{"10.0.0.0/24"}, Prefix: 24, Gateway: "10.0.0.1", AllocateReservedIPAddresses: true},
			wantFamily: 4,
			wantSubnet: "10.0.0.0/24",
			wantRanges: []string{"10.0.0.0-10.0.0.0", "10.0.0.2-10.0.0.255"},
			wantSize:   255,
		},
		{
			name:       "IPv4 /31 keeps both addresses",
			spec:       Spec{Addresses: []string{"10.0.0.0/31"}, Prefix: 31},
			wantFamily: 4,
			wantSubnet: "10.0.0.0/31",
			wantRanges: []string{"10.0.0.0-10.0.0.1"},
			wantSize:   2,
		},
		{
			name:       "IPv4 /31 still loses its gateway",
			spec:       Spec{Addresses: []string{"10.0.0.0-10.0.0.1"}, Prefix: 31, Gateway: "10.0.0.0"},
			wantFamily: 4,
			wantSubnet: "10.0.0.0/31",
			wantRanges: []string{"10.0.0.1-10.0.0.1"},
			wantSize:   1,
		},
		{
			name:       "IPv4 /32 keeps its single address",
			spec:       Spec{Addresses: []string{"10.0.0.7"}, Prefix: 32},
			wantFamily: 4,
			wantSubnet: "10.0.0.7/32",
			wantRanges: []string{"10.0.0.7-10.0.0.7"},
			wantSize:   1,
		},
		{
			name:       "IPv4 /30 range loses network and broadcast",
			spec:       Spec{Addresses: []string{"10.0.0.0-10.0.0.3"}, Prefix: 30},
			wantFamily: 4,
			wantSubnet: "10.0.0.0/30",
			wantRanges: []string{"10.0.0.1-10.0.0.2"},
			wantSize:   2,
		},
		{
			name:       "non-contiguous entries are all kept, with spaces around the dash",
			spec:       Spec{Addresses: []string{"10.0.0.100/30", "10.0.0.10 - 10.0.0.12", " 10.0.0.50 "}, Prefix: 24},
			wantFamily: 4,
			wantSubnet: "10.0.0.0/24",
			wantRanges: []string{"10.0.0.10-10.0.0.12", "10.0.0.50-10.0.0.50", "10.0.0.100-10.0.0.103"},
			wantSize:   8,
		},
		{
			name:       "exclusions given as ranges and CIDRs are removed",
			spec:       Spec{Addresses: []string{"10.0.0.0/24"}, Prefix: 24, ExcludedAddresses: []string{"10.0.0.10-10.0.0.19", "10.0.0.128/25", "10.0.0.5"}},
			wantFamily: 4,
			wantSubnet: "10.0.0.0/24",
			wantRanges: []string{"10.0.0.1-10.0.0.4", "10.0.0.6-10.0.0.9", "10.0.0.20-10.0.0.127"},
			wantSize:   4 + 4 + 108,
		},
		{
			name:       "exclusions outside the subnet are harmless",
			spec:       Spec{Addresses: []string{"10.0.0.8/29"}, Prefix: 29, ExcludedAddresses: []string{"192.168.0.0/16"}},
			wantFamily: 4,
			wantSubnet: "10.0.0.8/29",
			wantRanges: []string{"10.0.0.9-10.0.0.14"},
			wantSize:   6,
		},
		{
			name:       "subnet comes from the first entry and gateway need not be in the addresses",
			spec:       Spec{Addresses: []string{"10.0.0.200-10.0.0.202"}, Prefix: 24, Gateway: "10.0.0.1"},
			wantFamily: 4,
			wantSubnet: "10.0.0.0/24",
			wantRanges: []string{"10.0.0.200-10.0.0.202"},
			wantSize:   3,
		},
		{
			name:       "CIDR with host bits set stands for its network",
			spec:       Spec{Addresses: []string{"10.0.0.9/30"}, Prefix: 24},
			wantFamily: 4,
			wantSubnet: "10.0.0.0/24",
			wantRanges: []string{"10.0.0.8-10.0.0.11"},
			wantSize:   4,
		},
		{
			name:       "IPv4 /8 is sized without enumerating it",
			spec:       Spec{Addresses: []string{"10.0.0.0/8"}, Prefix: 8, Gateway: "10.0.0.1"},
			wantFamily: 4,
			wantSubnet: "10.0.0.0/8",
			wantRanges: []string{"10.0.0.2-10.255.255.254"},
			wantSize:   1<<24 - 3,
		},
		{
			name:       "IPv6 /120 loses the subnet-router anycast address and gateway but has no broadcast",
			spec:       Spec{Addresses: []string{"fd00::/120"}, Prefix: 120, Gateway: "fd00::1"},
			wantFamily: 6,
			wantSubnet: "fd00::/120",
			wantRanges: []string{"fd00::2-fd00::ff"},
			wantSize:   254,
		},
		{
			name:       "IPv6 allocating reserved addresses keeps the anycast address",
			spec:       Spec{Addresses: []string{"fd00::/120"}, Prefix: 120, AllocateReservedIPAddresses: true},
			wantFamily: 6,
			wantSubnet: "fd00::/120",
			wantRanges: []string{"fd00::-fd00::ff"},
			wantSize:   256,
		},
		{
			name:       "IPv6 /127 keeps both addresses",
			spec:       Spec{Addresses: []string{"fd00::/127"}, Prefix: 127},
			wantFamily: 6,
			wantSubnet: "fd00::/127",
			wantRanges: []string{"fd00::-fd00::1"},
			wantSize:   2,
		},
		{
			name:       "IPv6 /127 still loses its gateway",
			spec:       Spec{Addresses: []string{"fd00::/127"}, Prefix: 127, Gateway: "fd00::1"},
			wantFamily: 6,
			wantSubnet: "fd00::/127",
			wantRanges: []string{"fd00::-fd00::"},
			wantSize:   1,
		},
		{
			name:       "IPv6 /128 keeps its single address",
			spec:       Spec{Addresses: []string{"fd00::5"}, Prefix: 128},
			wantFamily: 6,
			wantSubnet: "fd00::5/128",
			wantRanges: []string{"fd00::5-fd00::5"},
			wantSize:   1,
		},
		{
			name:       "IPv6 ranges and exclusions combine",
			spec:       Spec{Addresses: []string{"fd00::10-fd00::1f", "fd00::40/126"}, Prefix: 64, ExcludedAddresses: []string{"fd00::12-fd00::1e"}},
			wantFamily: 6,
			wantSubnet: "fd00::/64",
			wantRanges: []string{"fd00::10-fd00::11", "fd00::1f-fd00::1f", "fd00::40-fd00::43"},
			wantSize:   7,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			pool, err := Parse(tt.spec)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(pool.Family()).To(Equal(tt.wantFamily))
			g.Expect(pool.Subnet()).To(Equal(netip.MustParsePrefix(tt.wantSubnet)))
			g.Expect(rangeStrings(pool.IPSet())).To(Equal(tt.wantRanges))
			g.Expect(pool.Size()).To(Equal(big.NewInt(tt.wantSize)))
			n, capped := pool.SizeInt64()
			g.Expect(n).To(Equal(tt.wantSize))
			g.Expect(capped).To(BeFalse())
		})
	}
}

func TestParseSizesHugeIPv6PoolsExactly(t *testing.T) {
	two64 := new(big.Int).Lsh(big.NewInt(1), 64)
	minus := func(n int64) *big.Int { return new(big.Int).Sub(two64, big.NewInt(n)) }
	tests := []struct {
		name       string
		spec       Spec
		wantSize   *big.Int
		wantCapped bool
	}{
		{
			name:       "/64 without gateway is 2^64 minus the anycast address and capped",
			spec:       Spec{Addresses: []string{"fd00::/64"}, Prefix: 64},
			wantSize:   minus(1),
			wantCapped: true,
		},
		{
			name:       "/64 with gateway is 2^64 minus anycast and gateway",
			spec:       Spec{Addresses: []string{"fd00::/64"}, Prefix: 64, Gateway: "fd00::1"},
			wantSize:   minus(2),
			wantCapped: true,
		},
		{
			name:       "/64 allocating reserved addresses is exactly 2^64",
			spec:       Spec{Addresses: []string{"fd00::/64"}, Prefix: 64, AllocateReservedIPAddresses: true},
			wantSize:   two64,
			wantCapped: true,
		},
		{
			name:       "/66 fits in int64 and is not capped",
			spec:       Spec{Addresses: []string{"fd00::/66"}, Prefix: 66},
			wantSize:   big.NewInt(1<<62 - 1),
			wantCapped: false,
		},
		{
			name:       "/1 is 2^127 minus the network and anycast address",
			spec:       Spec{Addresses: []string{"::/1"}, Prefix: 1},
			wantSize:   new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 127), big.NewInt(1)),
			wantCapped: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			pool, err := Parse(tt.spec)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(pool.Size().Cmp(tt.wantSize)).To(Equal(0), "size %s, want %s", pool.Size(), tt.wantSize)
			n, capped := pool.SizeInt64()
			g.Expect(capped).To(Equal(tt.wantCapped))
			if capped {
				g.Expect(n).To(Equal(int64(math.MaxInt64)))
			} else {
				g.Expect(n).To(Equal(tt.wantSize.Int64()))
			}
		})
	}
	g := NewWithT(t)
	g.Expect(minus(1).String()).To(Equal("18446744073709551615"))
}

func TestPoolContains(t *testing.T) {
	pool := mustParse(t, Spec{
		Addresses:         []string{"10.0.0.0/24"},
		Prefix:            24,
		Gateway:           "10.0.0.1",
		ExcludedAddresses: []string{"10.0.0.100-10.0.0.109"},
	})
	tests := []struct {
		name string
		addr string
		want bool
	}{
		{name: "ordinary address is allocatable", addr: "10.0.0.50", want: true},
		{name: "network address is not allocatable", addr: "10.0.0.0", want: false},
		{name: "broadcast address is not allocatable", addr: "10.0.0.255", want: false},
		{name: "gateway is not allocatable", addr: "10.0.0.1", want: false},
		{name: "excluded address is not allocatable", addr: "10.0.0.105", want: false},
		{name: "address past the exclusion is allocatable", addr: "10.0.0.110", want: true},
		{name: "address outside the subnet is not allocatable", addr: "10.0.1.5", want: false},
		{name: "IPv4-mapped IPv6 address is not allocatable", addr: "::ffff:10.0.0.50", want: false},
		{name: "IPv6 address is not allocatable", addr: "fd00::50", want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(pool.Contains(netip.MustParseAddr(tt.addr))).To(Equal(tt.want))
		})
	}
	g := NewWithT(t)
	g.Expect(pool.Contains(netip.Addr{})).To(BeFalse())
	g.Expect(pool.Gateway()).To(Equal(netip.MustParseAddr("10.0.0.1")))
}

func mustParse(t testing.TB, spec Spec) *Pool {
	t.Helper()
	pool, err := Parse(spec)
	if err != nil {
		t.Fatalf("Parse(%+v): %v", spec, err)
	}
	return pool
}

func rangeStrings(set *netipx.IPSet) []string {
	var out []string
	for _, r := range set.Ranges() {
		out = append(out, strings.Join([]string{r.From().String(), r.To().String()}, "-"))
	}
	return out
}

func TestParseRejectsPrefixZeroAndPoolsWithNothingToHandOut(t *testing.T) {
	tests := []struct {
		name  string
		spec  Spec
		field string
		want  error
	}{
		{"prefix 0 is not a subnet", Spec{Addresses: []string{"10.0.0.1"}, Prefix: 0}, "prefix", ErrPrefixOutOfRange},
		{"IPv6 prefix 0 is not a subnet", Spec{Addresses: []string{"::/0"}, Prefix: 0}, "prefix", ErrPrefixOutOfRange},
		{"every address excluded leaves nothing", Spec{Addresses: []string{"10.0.0.4/30"}, Prefix: 30, ExcludedAddresses: []string{"10.0.0.0/24"}}, "addresses", ErrNothingAllocatable},
		{"only the network address leaves nothing", Spec{Addresses: []string{"10.1.0.0"}, Prefix: 24}, "addresses", ErrNothingAllocatable},
		{"only the gateway leaves nothing", Spec{Addresses: []string{"10.1.0.1"}, Prefix: 24, Gateway: "10.1.0.1"}, "addresses", ErrNothingAllocatable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := Parse(tt.spec)
			g.Expect(err).To(MatchError(tt.want))
			var fe *FieldError
			g.Expect(errors.As(err, &fe)).To(BeTrue())
			g.Expect(fe.Field).To(Equal(tt.field))
		})
	}
}
