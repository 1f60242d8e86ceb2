package allocator

import (
	"errors"
	"fmt"
	"math/big"
	"net/netip"
	"slices"
	"testing"
	"time"
)

// fuzzInput hands out the fuzzer's bytes as small numbers; once they run
// out it returns zeros, so every input decodes to something.
type fuzzInput struct{ b []byte }

func (in *fuzzInput) byte() byte {
	if len(in.b) == 0 {
		return 0
	}
	c := in.b[0]
	in.b = in.b[1:]
	return c
}

func (in *fuzzInput) intn(n int) int {
	if n <= 256 {
		return int(in.byte()) % n
	}
	return (int(in.byte())<<8 | int(in.byte())) % n
}

// fuzzBases sit at the bottom, middle and top of each address space so that
// wrap-around at either end gets exercised.
var fuzzBases = []netip.Addr{
	netip.MustParseAddr("10.1.0.0"),
	netip.MustParseAddr("0.0.0.0"),
	netip.MustParseAddr("255.255.252.0"),
	netip.MustParseAddr("fd00::"),
	netip.MustParseAddr("::"),
	netip.MustParseAddr("ffff:ffff:ffff:ffff:ffff:ffff:ffff:fc00"),
}

func addrAdd(a netip.Addr, delta int) netip.Addr {
	n := new(big.Int).SetBytes(a.AsSlice())
	n.Add(n, big.NewInt(int64(delta)))
	buf := make([]byte, a.BitLen()/8)
	n.FillBytes(buf)
	out, _ := netip.AddrFromSlice(buf)
	return out
}

// model is the obviously-correct allocator the real one is checked against:
// one flag per address of a subnet small enough to enumerate.
type model struct {
	base        netip.Addr
	size        int
	allocatable []bool
	held        map[int]bool
	cooling     map[int]time.Time
	outOfRange  map[netip.Addr]bool
	grace       time.Duration
}

func (m *model) offset(a netip.Addr) (int, bool) {
	if a.BitLen() != m.base.BitLen() || a.Less(m.base) {
		return 0, false
	}
	d := new(big.Int).Sub(new(big.Int).SetBytes(a.AsSlice()), new(big.Int).SetBytes(m.base.AsSlice()))
	if !d.IsInt64() || d.Int64() >= int64(m.size) {
		return 0, false
	}
	return int(d.Int64()), true
}

func (m *model) inPool(a netip.Addr) (int, bool) {
	o, ok := m.offset(a)
	return o, ok && m.allocatable[o]
}

func (m *model) expire(now time.Time) {
	for o, at := range m.cooling {
		if !now.Before(at) {
			delete(m.cooling, o)
		}
	}
}

func (m *model) lowestFree() (netip.Addr, bool) {
	for o := range m.size {
		if m.allocatable[o] && !m.held[o] {
			if _, cooling := m.cooling[o]; !cooling {
				return addrAdd(m.base, o), true
			}
		}
	}
	return netip.Addr{}, false
}

func (m *model) total() int {
	n := 0
	for _, ok := range m.allocatable {
		if ok {
			n++
		}
	}
	return n
}

// fuzzPool decodes a small pool: up to 3 entries, 2 exclusions, an optional
// gateway and the reserved flag, all inside a subnet of at most 1024
// addresses. It returns the spec and the model's independent view of which
// addresses are allocatable.
func fuzzPool(in *fuzzInput) (Spec, *model) {
	base := fuzzBases[in.intn(len(fuzzBases))]
	hostBits := in.intn(11)
	size := 1 << hostBits
	bits := base.BitLen() - hostBits
	m := &model{
		base:        base,
		size:        size,
		allocatable: make([]bool, size),
		held:        map[int]bool{},
		cooling:     map[int]time.Time{},
		outOfRange:  map[netip.Addr]bool{},
	}
	spec := Spec{Prefix: bits, AllocateReservedIPAddresses: in.byte()&1 == 1}

	// entry returns the spec string of a random entry and its offsets,
	// clamped to the subnet.
	entry := func() (string, int, int) {
		from := in.intn(size)
		switch in.intn(3) {
		case 0:
			a := addrAdd(base, from)
			return a.String(), from, from
		case 1:
			to := from + in.intn(size-from)
			sep := []string{"-", " - ", "- "}[in.intn(3)]
			return addrAdd(base, from).String() + sep + addrAdd(base, to).String(), from, to
		default:
			sub := in.intn(hostBits + 1)
			from &^= 1<<sub - 1
			return fmt.Sprintf("%s/%d", addrAdd(base, from), base.BitLen()-sub), from, from + 1<<sub - 1
		}
	}
	mark := func(from, to int, v bool) {
		for o := from; o <= to; o++ {
			m.allocatable[o] = v
		}
	}
	for range 1 + in.intn(3) {
		s, from, to := entry()
		spec.Addresses = append(spec.Addresses, s)
		mark(from, to, true)
	}
	for range in.intn(3) {
		s, from, to := entry()
		spec.ExcludedAddresses = append(spec.ExcludedAddresses, s)
		mark(from, to, false)
	}
	if in.byte()&1 == 1 {
		gw := in.intn(size)
		spec.Gateway = addrAdd(base, gw).String()
		m.allocatable[gw] = false
	}
	if !spec.AllocateReservedIPAddresses && hostBits >= 2 {
		m.allocatable[0] = false
		if base.Is4() {
			m.allocatable[size-1] = false
		}
	}
	// The subnet is taken from the first entry; it is the same as base's
	// because every entry lies inside it.
	return spec, m
}

// pickAddr returns an address for an op: mostly inside the subnet, sometimes
// just outside it or of the other family.
func (m *model) pickAddr(in *fuzzInput) netip.Addr {
	k := in.intn(2*m.size + 1)
	switch {
	case k < m.size:
		return addrAdd(m.base, k)
	case k == 2*m.size:
		if m.base.Is4() {
			return netip.MustParseAddr("fd00::1")
		}
		return netip.MustParseAddr("10.0.0.1")
	case m.base.IsUnspecified():
		// Nothing below the bottom of the address space: step above.
		return addrAdd(m.base, k)
	default:
		return addrAdd(m.base, -(k - m.size + 1))
	}
}

func FuzzAllocator(f *testing.F) {
	f.Add([]byte{0, 8, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{3, 10, 1, 2, 0, 0, 1, 0, 4, 1, 1, 0, 5, 0, 7, 0, 2, 1, 0, 2, 3, 0, 9, 1, 1, 5, 9, 3, 1, 0, 0, 0, 3, 0, 5, 2})
	f.Add([]byte{5, 2, 0, 0, 0, 0, 0, 1, 1, 1, 0, 0, 1, 1, 1, 0, 3, 0, 0, 0, 0})
	f.Add([]byte{2, 6, 0, 3, 2, 0, 10, 0, 30, 0, 1, 2, 0, 4, 1, 2, 0, 63, 0, 0, 0, 2, 0, 0, 3, 0, 2, 3, 0, 5, 1, 0, 3, 0, 2, 0, 0, 4, 1, 0})
	f.Add([]byte{4, 1, 1, 0, 0, 0, 1, 0, 0, 2, 0, 3, 0, 0, 0, 0, 0, 5, 39, 0, 0})
	f.Add([]byte("the quick brown fox jumps over the lazy dog, twice: the quick brown fox jumps over the lazy dog"))
	f.Fuzz(func(t *testing.T, data []byte) {
		in := &fuzzInput{b: data}
		spec, m := fuzzPool(in)
		m.grace = []time.Duration{0, 0, 10 * time.Second, time.Minute}[in.intn(4)]

		pool, err := Parse(spec)
		if errors.Is(err, ErrNothingAllocatable) && m.total() == 0 {
			return // rejected, as it must be: nothing to fuzz
		}
		if err != nil {
			t.Fatalf("Parse(%+v): %v", spec, err)
		}
		if got, want := pool.Size(), big.NewInt(int64(m.total())); got.Cmp(want) != 0 {
			t.Fatalf("Parse(%+v): size %s, model %s", spec, got, want)
		}
		for o := range m.size {
			if a := addrAdd(m.base, o); pool.Contains(a) != m.allocatable[o] {
				t.Fatalf("Parse(%+v): Contains(%s) = %v, model %v", spec, a, pool.Contains(a), m.allocatable[o])
			}
		}

		clock := newFakeClock()
		a := NewWithOptions(pool, Options{GracePeriod: m.grace, Now: clock.Now})
		for step := 0; len(in.b) > 0 && step < 300; step++ {
			m.expire(clock.Now())
			var desc string
			switch op := in.intn(6); op {
			case 0, 1:
				want, wantOK := m.lowestFree()
				got, err := a.Allocate()
				desc = fmt.Sprintf("Allocate() = %s, %v", got, err)
				if !wantOK {
					if !errors.Is(err, ErrExhausted) {
						t.Fatalf("%s: model says exhausted", desc)
					}
					break
				}
				if err != nil || got != want {
					t.Fatalf("%s: model says %s", desc, want)
				}
				if !pool.IPSet().Contains(got) || !pool.Contains(got) {
					t.Fatalf("%s: outside the pool", desc)
				}
				o, _ := m.inPool(got)
				if m.held[o] {
					t.Fatalf("%s: already held", desc)
				}
				m.held[o] = true
			case 2:
				addr := m.pickAddr(in)
				err := a.AllocateSpecific(addr)
				desc = fmt.Sprintf("AllocateSpecific(%s) = %v", addr, err)
				o, ok := m.inPool(addr)
				_, cooling := m.cooling[o]
				var want error
				switch {
				case !ok:
					want = ErrNotInPool
				case m.held[o]:
					want = ErrInUse
				case cooling:
					want = ErrInGracePeriod
				}
				if want == nil && err != nil || want != nil && !errors.Is(err, want) {
					t.Fatalf("%s: model wants %v", desc, want)
				}
				if want == nil {
					m.held[o] = true
				}
			case 3:
				var addr netip.Addr
				if held := m.heldSorted(); len(held) > 0 && in.byte()&1 == 0 {
					addr = addrAdd(m.base, held[in.intn(len(held))])
				} else {
					addr = m.pickAddr(in)
				}
				a.Release(addr)
				desc = fmt.Sprintf("Release(%s)", addr)
				if o, ok := m.inPool(addr); ok && m.held[o] {
					delete(m.held, o)
					if m.grace > 0 {
						m.cooling[o] = clock.Now().Add(m.grace)
					}
				}
				delete(m.outOfRange, addr)
			case 4:
				addr := m.pickAddr(in)
				got := a.MarkUsed(addr)
				desc = fmt.Sprintf("MarkUsed(%s) = %v", addr, got)
				o, ok := m.inPool(addr)
				if got != ok {
					t.Fatalf("%s: model says in pool %v", desc, ok)
				}
				if ok {
					m.held[o] = true
					delete(m.cooling, o)
				} else {
					m.outOfRange[addr] = true
				}
			case 5:
				d := time.Duration(in.intn(40)) * time.Second
				clock.Advance(d)
				m.expire(clock.Now())
				desc = fmt.Sprintf("Advance(%s)", d)
			}
			m.check(t, a, desc)
		}
		m.checkEveryAddress(t, a)
	})
}

func (m *model) heldSorted() []int {
	var out []int
	for o := range m.held {
		out = append(out, o)
	}
	slices.Sort(out)
	return out
}

func (m *model) check(t *testing.T, a *Allocator, after string) {
	t.Helper()
	c := a.Counts()
	total, used := int64(m.total()), int64(len(m.held)+len(m.cooling))
	if c.Total.Int64() != total || c.Used.Int64() != used || c.OutOfRange != len(m.outOfRange) {
		t.Fatalf("after %s: counts total %s used %s outOfRange %d, model %d %d %d", after, c.Total, c.Used, c.OutOfRange, total, used, len(m.outOfRange))
	}
	if new(big.Int).Add(c.Used, c.Free).Cmp(c.Total) != 0 {
		t.Fatalf("after %s: used %s + free %s != total %s", after, c.Used, c.Free, c.Total)
	}
	var want time.Time
	for _, at := range m.cooling {
		if want.IsZero() || at.Before(want) {
			want = at
		}
	}
	got, ok := a.NextReusable()
	if ok != !want.IsZero() || !got.Equal(want) {
		t.Fatalf("after %s: NextReusable() = %s, %v; model %s", after, got, ok, want)
	}
}

func (m *model) checkEveryAddress(t *testing.T, a *Allocator) {
	t.Helper()
	for o := range m.size {
		addr := addrAdd(m.base, o)
		_, cooling := m.cooling[o]
		if got, want := a.IsUsed(addr), m.held[o] || m.outOfRange[addr]; got != want {
			t.Fatalf("IsUsed(%s) = %v, model %v", addr, got, want)
		}
		if got := a.InGracePeriod(addr); got != cooling {
			t.Fatalf("InGracePeriod(%s) = %v, model %v", addr, got, cooling)
		}
	}
}
