package allocator

import (
	"math"
	"math/big"
	"net/netip"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// fakeClock is moved by hand so grace periods are tested without sleeping.
type fakeClock struct{ t time.Time }

func (c *fakeClock) Now() time.Time          { return c.t }
func (c *fakeClock) Advance(d time.Duration) { c.t = c.t.Add(d) }

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func ip(s string) netip.Addr { return netip.MustParseAddr(s) }

func TestAllocateHandsOutLowestFirstUntilExhausted(t *testing.T) {
	tests := []struct {
		name string
		spec Spec
		want []string
	}{
		{
			name: "non-contiguous IPv4 entries are handed out in address order, skipping the gateway",
			spec: Spec{Addresses: []string{"10.0.0.20-10.0.0.21", "10.0.0.5", "10.0.0.10/31"}, Prefix: 24, Gateway: "10.0.0.11"},
			want: []string{"10.0.0.5", "10.0.0.10", "10.0.0.20", "10.0.0.21"},
		},
		{
			name: "IPv4 /30 hands out only its two host addresses",
			spec: Spec{Addresses: []string{"10.0.0.0/30"}, Prefix: 30},
			want: []string{"10.0.0.1", "10.0.0.2"},
		},
		{
			name: "IPv6 /126 skips the anycast address and hands out the last one",
			spec: Spec{Addresses: []string{"fd00::/126"}, Prefix: 126},
			want: []string{"fd00::1", "fd00::2", "fd00::3"},
		},
		{
			name: "exclusions are skipped",
			spec: Spec{Addresses: []string{"10.0.0.0/28"}, Prefix: 28, ExcludedAddresses: []string{"10.0.0.2-10.0.0.13"}},
			want: []string{"10.0.0.1", "10.0.0.14"},
		},
		{
			name: "highest IPv6 address is handed out without overflowing",
			spec: Spec{Addresses: []string{"ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe/127"}, Prefix: 127},
			want: []string{"ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			a := New(mustParse(t, tt.spec))
			var got []string
			for range len(tt.want) {
				addr, err := a.Allocate()
				g.Expect(err).NotTo(HaveOccurred())
				got = append(got, addr.String())
			}
			g.Expect(got).To(Equal(tt.want))
			_, err := a.Allocate()
			g.Expect(err).To(MatchError(ErrExhausted))
			g.Expect(err.Error()).To(ContainSubstring(a.Pool().Subnet().String()))
			c := a.Counts()
			g.Expect(c.Free.Sign()).To(Equal(0))
			g.Expect(c.Used).To(Equal(big.NewInt(int64(len(tt.want)))))
		})
	}
}

func TestReleaseMakesAddressAllocatableAgain(t *testing.T) {
	g := NewWithT(t)
	a := New(mustParse(t, Spec{Addresses: []string{"10.0.0.1-10.0.0.5"}, Prefix: 24}))
	for range 5 {
		_, err := a.Allocate()
		g.Expect(err).NotTo(HaveOccurred())
	}
	a.Release(ip("10.0.0.4"))
	a.Release(ip("10.0.0.2"))
	a.Release(ip("10.0.0.2")) // idempotent
	a.Release(ip("10.0.0.3")) // merges both neighbours
	a.Release(ip("10.0.9.9")) // never held: no-op

	c := a.Counts()
	g.Expect(c.Used).To(Equal(big.NewInt(2)))
	g.Expect(c.Free).To(Equal(big.NewInt(3)))
	for _, want := range []string{"10.0.0.2", "10.0.0.3", "10.0.0.4"} {
		got, err := a.Allocate()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got).To(Equal(ip(want)))
	}
	_, err := a.Allocate()
	g.Expect(err).To(MatchError(ErrExhausted))
}

func TestAllocateSpecific(t *testing.T) {
	spec := Spec{
		Addresses:         []string{"10.0.0.0/24"},
		Prefix:            24,
		Gateway:           "10.0.0.1",
		ExcludedAddresses: []string{"10.0.0.200/29"},
	}
	tests := []struct {
		name    string
		addr    netip.Addr
		setup   func(a *Allocator)
		wantErr error
		wantMsg string
	}{
		{name: "free address is taken", addr: ip("10.0.0.77")},
		{name: "last host address is taken", addr: ip("10.0.0.254")},
		{
			name:    "address held by Allocate is in use",
			addr:    ip("10.0.0.2"),
			setup:   func(a *Allocator) { _, _ = a.Allocate() },
			wantErr: ErrInUse,
			wantMsg: "10.0.0.2",
		},
		{
			name:    "address recorded by MarkUsed is in use",
			addr:    ip("10.0.0.50"),
			setup:   func(a *Allocator) { a.MarkUsed(ip("10.0.0.50")) },
			wantErr: ErrInUse,
		},
		{
			name:    "gateway is not in the pool",
			addr:    ip("10.0.0.1"),
			wantErr: ErrNotInPool,
			wantMsg: "10.0.0.1 is the gateway in pool 10.0.0.0/24",
		},
		{
			name:    "network address is not in the pool",
			addr:    ip("10.0.0.0"),
			wantErr: ErrNotInPool,
			wantMsg: "reserved",
		},
		{
			name:    "broadcast address is not in the pool",
			addr:    ip("10.0.0.255"),
			wantErr: ErrNotInPool,
			wantMsg: "reserved",
		},
		{
			name:    "excluded address is not in the pool",
			addr:    ip("10.0.0.203"),
			wantErr: ErrNotInPool,
			wantMsg: "10.0.0.203 is excluded",
		},
		{
			name:    "address outside the subnet is not in the pool",
			addr:    ip("192.168.1.1"),
			wantErr: ErrNotInPool,
			wantMsg: "outside the pool's addresses",
		},
		{
			name:    "IPv6 address is not in an IPv4 pool",
			addr:    ip("fd00::1"),
			wantErr: ErrNotInPool,
			wantMsg: "is not an IPv4 address",
		},
		{
			name:    "zero address is not in the pool",
			addr:    netip.Addr{},
			wantErr: ErrNotInPool,
			wantMsg: "not a valid address",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			a := New(mustParse(t, spec))
			if tt.setup != nil {
				tt.setup(a)
			}
			before := a.Counts()
			err := a.AllocateSpecific(tt.addr)
			if tt.wantErr == nil {
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(a.IsUsed(tt.addr)).To(BeTrue())
				g.Expect(a.Counts().Used).To(Equal(new(big.Int).Add(before.Used, big.NewInt(1))))
				return
			}
			g.Expect(err).To(MatchError(tt.wantErr))
			g.Expect(err.Error()).To(ContainSubstring(tt.wantMsg))
			g.Expect(a.Counts()).To(Equal(before))
		})
	}
}

func TestAllocateSkipsSpecificAndMarkedAddresses(t *testing.T) {
	g := NewWithT(t)
	a := New(mustParse(t, Spec{Addresses: []string{"10.0.0.1-10.0.0.6"}, Prefix: 24}))
	g.Expect(a.AllocateSpecific(ip("10.0.0.1"))).To(Succeed())
	g.Expect(a.MarkUsed(ip("10.0.0.3"))).To(BeTrue())
	g.Expect(a.AllocateSpecific(ip("10.0.0.5"))).To(Succeed())

	var got []netip.Addr
	for range 3 {
		addr, err := a.Allocate()
		g.Expect(err).NotTo(HaveOccurred())
		got = append(got, addr)
	}
	g.Expect(got).To(Equal([]netip.Addr{ip("10.0.0.2"), ip("10.0.0.4"), ip("10.0.0.6")}))
	_, err := a.Allocate()
	g.Expect(err).To(MatchError(ErrExhausted))
}

func TestMarkUsed(t *testing.T) {
	spec := Spec{Addresses: []string{"10.0.0.0/29"}, Prefix: 29, Gateway: "10.0.0.1", ExcludedAddresses: []string{"10.0.0.6"}}
	// Allocatable: 10.0.0.2-10.0.0.5, so Total is 4.
	tests := []struct {
		name           string
		addrs          []string
		wantInPool     []bool
		wantUsed       int64
		wantOutOfRange int
	}{
		{
			name:       "in-pool address counts as used",
			addrs:      []string{"10.0.0.3"},
			wantInPool: []bool{true},
			wantUsed:   1,
		},
		{
			name:       "marking the same address twice counts it once",
			addrs:      []string{"10.0.0.3", "10.0.0.3"},
			wantInPool: []bool{true, true},
			wantUsed:   1,
		},
		{
			name:           "address outside the subnet counts as out of range, not used",
			addrs:          []string{"10.0.1.3"},
			wantInPool:     []bool{false},
			wantOutOfRange: 1,
		},
		{
			name:           "gateway, excluded and broadcast addresses count as out of range",
			addrs:          []string{"10.0.0.1", "10.0.0.6", "10.0.0.7"},
			wantInPool:     []bool{false, false, false},
			wantOutOfRange: 3,
		},
		{
			name:           "out-of-range addresses are counted once each",
			addrs:          []string{"10.0.1.3", "10.0.1.3", "fd00::1"},
			wantInPool:     []bool{false, false, false},
			wantOutOfRange: 2,
		},
		{
			name:           "mixed in-pool and out-of-range addresses are counted apart",
			addrs:          []string{"10.0.0.2", "192.168.0.1", "10.0.0.5"},
			wantInPool:     []bool{true, false, true},
			wantUsed:       2,
			wantOutOfRange: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			a := New(mustParse(t, spec))
			for i, s := range tt.addrs {
				g.Expect(a.MarkUsed(ip(s))).To(Equal(tt.wantInPool[i]), s)
				g.Expect(a.IsUsed(ip(s))).To(BeTrue(), s)
			}
			c := a.Counts()
			g.Expect(c.Total).To(Equal(big.NewInt(4)))
			g.Expect(c.Used).To(Equal(big.NewInt(tt.wantUsed)))
			g.Expect(c.Free).To(Equal(big.NewInt(4 - tt.wantUsed)))
			g.Expect(c.OutOfRange).To(Equal(tt.wantOutOfRange))

			for _, s := range tt.addrs {
				a.Release(ip(s))
				g.Expect(a.IsUsed(ip(s))).To(BeFalse(), s)
			}
			c = a.Counts()
			g.Expect(c.Used.Sign()).To(Equal(0))
			g.Expect(c.OutOfRange).To(Equal(0))
		})
	}
}

func TestMarkUsedIgnoresTheZeroAddress(t *testing.T) {
	g := NewWithT(t)
	a := New(mustParse(t, Spec{Addresses: []string{"10.0.0.0/24"}, Prefix: 24}))
	g.Expect(a.MarkUsed(netip.Addr{})).To(BeFalse())
	g.Expect(a.Counts().OutOfRange).To(Equal(0))
}

func TestGracePeriod(t *testing.T) {
	g := NewWithT(t)
	clock := newFakeClock()
	a := NewWithOptions(mustParse(t, Spec{Addresses: []string{"10.0.0.1-10.0.0.3"}, Prefix: 24}), Options{
		GracePeriod: time.Minute,
		Now:         clock.Now,
	})
	for range 3 {
		_, err := a.Allocate()
		g.Expect(err).NotTo(HaveOccurred())
	}
	_, ok := a.NextReusable()
	g.Expect(ok).To(BeFalse(), "nothing is cooling down yet")

	start := clock.Now()
	a.Release(ip("10.0.0.2"))
	clock.Advance(10 * time.Second)
	a.Release(ip("10.0.0.1"))
	a.Release(ip("10.0.0.1")) // idempotent: does not restart the grace period

	g.Expect(a.IsUsed(ip("10.0.0.2"))).To(BeFalse())
	g.Expect(a.InGracePeriod(ip("10.0.0.2"))).To(BeTrue())
	_, err := a.Allocate()
	g.Expect(err).To(MatchError(ErrExhausted))
	g.Expect(err.Error()).To(ContainSubstring("2 released addresses still cooling down"))
	g.Expect(a.AllocateSpecific(ip("10.0.0.2"))).To(MatchError(ErrInGracePeriod))
	c := a.Counts()
	g.Expect(c.Used).To(Equal(big.NewInt(3)), "cooling-down addresses count as used")
	g.Expect(c.Free.Sign()).To(Equal(0))
	at, ok := a.NextReusable()
	g.Expect(ok).To(BeTrue())
	g.Expect(at).To(Equal(start.Add(time.Minute)))

	clock.Advance(49 * time.Second) // 59s after the first release
	_, err = a.Allocate()
	g.Expect(err).To(MatchError(ErrExhausted))

	clock.Advance(time.Second) // exactly one grace period after 10.0.0.2 was released
	got, err := a.Allocate()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(ip("10.0.0.2")), "10.0.0.1 is still cooling down")
	at, ok = a.NextReusable()
	g.Expect(ok).To(BeTrue())
	g.Expect(at).To(Equal(start.Add(70 * time.Second)))

	clock.Advance(10 * time.Second)
	g.Expect(a.AllocateSpecific(ip("10.0.0.1"))).To(Succeed())
	_, ok = a.NextReusable()
	g.Expect(ok).To(BeFalse())
	c = a.Counts()
	g.Expect(c.Used).To(Equal(big.NewInt(3)))
}

func TestMarkUsedEndsGracePeriod(t *testing.T) {
	g := NewWithT(t)
	clock := newFakeClock()
	a := NewWithOptions(mustParse(t, Spec{Addresses: []string{"10.0.0.1-10.0.0.2"}, Prefix: 24}), Options{
		GracePeriod: time.Minute,
		Now:         clock.Now,
	})
	g.Expect(a.AllocateSpecific(ip("10.0.0.1"))).To(Succeed())
	a.Release(ip("10.0.0.1"))
	g.Expect(a.MarkUsed(ip("10.0.0.1"))).To(BeTrue(), "an existing IPAddress wins over the grace period")
	g.Expect(a.InGracePeriod(ip("10.0.0.1"))).To(BeFalse())
	_, ok := a.NextReusable()
	g.Expect(ok).To(BeFalse(), "the stale expiry is not reported")

	// Release again later: only the new grace period counts.
	clock.Advance(30 * time.Second)
	a.Release(ip("10.0.0.1"))
	clock.Advance(30 * time.Second) // the first grace period would end now
	g.Expect(a.InGracePeriod(ip("10.0.0.1"))).To(BeTrue())
	at, ok := a.NextReusable()
	g.Expect(ok).To(BeTrue())
	g.Expect(at).To(Equal(clock.Now().Add(30 * time.Second)))
	g.Expect(a.Counts().Used).To(Equal(big.NewInt(1)))

	clock.Advance(30 * time.Second)
	got, err := a.Allocate()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(ip("10.0.0.1")))
}

func TestCountsOfHugePools(t *testing.T) {
	g := NewWithT(t)
	a := New(mustParse(t, Spec{Addresses: []string{"fd00::/64"}, Prefix: 64, Gateway: "fd00::1"}))
	for range 1000 {
		_, err := a.Allocate()
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(a.MarkUsed(ip("fd00::ffff:ffff:ffff:ffff"))).To(BeTrue())
	g.Expect(a.MarkUsed(ip("fd01::1"))).To(BeFalse())

	c := a.Counts()
	total, _ := new(big.Int).SetString("18446744073709551614", 10)
	g.Expect(c.Total).To(Equal(total))
	g.Expect(c.Used).To(Equal(big.NewInt(1001)))
	g.Expect(new(big.Int).Add(c.Used, c.Free)).To(Equal(total))
	g.Expect(c.OutOfRange).To(Equal(1))

	small := c.Int64()
	g.Expect(small).To(Equal(Int64Counts{
		Total:      math.MaxInt64,
		Used:       1001,
		Free:       math.MaxInt64,
		OutOfRange: 1,
		Capped:     true,
	}))

	got, err := a.Allocate()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(ip("fd00::3ea")), "fd00::2 to fd00::3e9 are taken")
}

func TestCountsInt64IsNotCappedForSmallPools(t *testing.T) {
	g := NewWithT(t)
	a := New(mustParse(t, Spec{Addresses: []string{"10.0.0.0/8"}, Prefix: 8}))
	_, err := a.Allocate()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(a.Counts().Int64()).To(Equal(Int64Counts{Total: 1<<24 - 2, Used: 1, Free: 1<<24 - 3}))
}

func TestConcurrentAllocationsAreDistinct(t *testing.T) {
	g := NewWithT(t)
	a := New(mustParse(t, Spec{Addresses: []string{"10.0.0.0/16"}, Prefix: 16}))
	const workers, each = 8, 1000
	results := make([][]netip.Addr, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				addr, err := a.Allocate()
				if err != nil {
					t.Errorf("Allocate: %v", err)
					return
				}
				results[w] = append(results[w], addr)
				if i%3 == 0 {
					a.Release(addr)
					results[w] = results[w][:len(results[w])-1]
				}
			}
		})
	}
	wg.Wait()
	seen := map[netip.Addr]bool{}
	for _, rs := range results {
		for _, addr := range rs {
			g.Expect(seen[addr]).To(BeFalse(), "%s handed out twice", addr)
			seen[addr] = true
			g.Expect(a.IsUsed(addr)).To(BeTrue())
		}
	}
	g.Expect(a.Counts().Used).To(Equal(big.NewInt(int64(len(seen)))))
}

func TestUnallocateFreesAtOnceDespiteAGracePeriod(t *testing.T) {
	g := NewWithT(t)
	pool, err := Parse(Spec{Addresses: []string{"10.0.0.1-10.0.0.2"}, Prefix: 24})
	g.Expect(err).NotTo(HaveOccurred())
	a := NewWithOptions(pool, Options{GracePeriod: time.Hour})
	first, err := a.Allocate()
	g.Expect(err).NotTo(HaveOccurred())
	a.Unallocate(first)
	again, err := a.Allocate()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again).To(Equal(first), "an address never used is not cooled down")
	a.Unallocate(netip.MustParseAddr("10.0.0.9")) // not held: no-op
	g.Expect(a.Counts().Int64().Used).To(Equal(int64(1)))
}

func TestHeldListsInPoolAndOutOfRangeAddresses(t *testing.T) {
	g := NewWithT(t)
	pool, err := Parse(Spec{Addresses: []string{"10.0.0.0/30"}, Prefix: 24})
	g.Expect(err).NotTo(HaveOccurred())
	a := New(pool)
	in, err := a.Allocate()
	g.Expect(err).NotTo(HaveOccurred())
	out := netip.MustParseAddr("192.168.0.1")
	a.MarkUsed(out)
	g.Expect(a.Held()).To(ConsistOf(in, out))
}
