package ledger

import (
	"errors"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/capi-monolith/capi-monolith/ipam/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/ipam/internal/allocator"
)

// specOf reads a pool spec from lines: "prefix N", "gateway G",
// "reserved", "grace N", "exclude E"; any other line is an address entry.
func specOf(text string) v1alpha1.IPPoolSpec {
	var s v1alpha1.IPPoolSpec
	for line := range strings.SplitSeq(text, "\n") {
		key, value, _ := strings.Cut(line, " ")
		switch key {
		case "prefix":
			n, _ := strconv.Atoi(value)
			s.Prefix = int32(n)
		case "gateway":
			s.Gateway = value
		case "reserved":
			s.AllocateReservedIPAddresses = true
		case "grace":
			n, _ := strconv.Atoi(value)
			s.AddressReuseGracePeriodSeconds = int32(n)
		case "exclude":
			s.ExcludedAddresses = append(s.ExcludedAddresses, value)
		default:
			s.Addresses = append(s.Addresses, line)
		}
	}
	return s
}

// FuzzPoolSpec feeds the pool spec parser every shape of spec (what the
// webhook and, with it off, the controller read): it never panics, rejects
// with ErrInvalidPool only, and a pool it accepts hands out addresses
// inside itself; the memory one spec costs is bounded by its size, however
// large the ranges it names (a /0 of IPv6 costs what a /30 does).
func FuzzPoolSpec(f *testing.F) {
	for _, seed := range []string{
		"prefix 24\n10.0.0.10-10.0.0.100\n10.0.0.200\n10.0.1.0/25\ngateway 10.0.0.1\nexclude 10.0.0.50",
		"prefix 64\nfd00::/64\ngateway fd00::1\nexclude fd00::10-fd00::20",
		"prefix 0\n::/0",
		"prefix 1\n0.0.0.0/1\nreserved",
		"prefix 31\n10.0.0.0/31",
		"prefix 24\n10.0.0.0\n",
		"prefix 24\n10.0.0.9-10.0.0.1",
		"prefix 24\nfd00::1\n10.0.0.1",
		"prefix 128\n::ffff:10.0.0.1",
		"prefix 24\n10.0.0.0/24\ngrace -1",
		"prefix 33\n10.0.0.0/24",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, text string) {
		spec := specOf(text)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		pool, err := Parse(spec)
		if err == nil {
			a := allocatorFor(pool)
			for range 64 {
				addr, err := a.Allocate()
				if err != nil {
					break
				}
				if !pool.Contains(addr) {
					t.Fatalf("allocated %s outside the pool %+v", addr, spec)
				}
			}
			_ = a.Counts()
		}
		runtime.ReadMemStats(&after)
		if n, limit := after.TotalAlloc-before.TotalAlloc, uint64(4<<20+1024*len(text)); n > limit {
			t.Fatalf("a spec of %d bytes allocated %d bytes, more than %d", len(text), n, limit)
		}
		if err != nil && !errors.Is(err, ErrInvalidPool) {
			t.Fatalf("Parse(%+v): an error that is not ErrInvalidPool: %v", spec, err)
		}
	})
}

func allocatorFor(p *allocator.Pool) *allocator.Allocator { return allocator.New(p) }
