package allocator

import (
	"net/netip"
	"testing"
)

// BenchmarkAllocate shows that finding the next free address costs the same
// whether a /16 is nearly empty or nearly full, and whether its free space
// is one run or a thousand scattered holes.
func BenchmarkAllocate(b *testing.B) {
	const batch = 1024
	pool, err := Parse(Spec{Addresses: []string{"10.0.0.0/16"}, Prefix: 16})
	if err != nil {
		b.Fatal(err)
	}

	// Each case prepares an allocator with exactly batch free addresses
	// left to take (or, near empty, batch addresses that will be taken
	// first), and the benchmark times taking them.
	cases := []struct {
		name    string
		prepare func() *Allocator
	}{
		{
			name:    "near empty",
			prepare: func() *Allocator { return New(pool) },
		},
		{
			name: "near full, one free run",
			prepare: func() *Allocator {
				a := fill(pool)
				for _, addr := range lastN(pool, batch) {
					a.Release(addr)
				}
				return a
			},
		},
		{
			name: "near full, scattered holes",
			prepare: func() *Allocator {
				a := fill(pool)
				// Every 63rd address: 1024 single-address holes, the worst
				// shape for a range list.
				addr := pool.Subnet().Addr()
				for range batch {
					for range 63 {
						addr = addr.Next()
					}
					a.Release(addr)
				}
				return a
			},
		},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			a := tc.prepare()
			left := batch
			b.ResetTimer()
			for b.Loop() {
				if left == 0 {
					b.StopTimer()
					a, left = tc.prepare(), batch
					b.StartTimer()
				}
				if _, err := a.Allocate(); err != nil {
					b.Fatal(err)
				}
				left--
			}
		})
	}
}

func fill(pool *Pool) *Allocator {
	a := New(pool)
	for {
		if _, err := a.Allocate(); err != nil {
			return a
		}
	}
}

func lastN(pool *Pool, n int) []netip.Addr {
	ranges := pool.IPSet().Ranges()
	addr := ranges[len(ranges)-1].To()
	out := make([]netip.Addr, 0, n)
	for range n {
		out = append(out, addr)
		addr = addr.Prev()
	}
	return out
}
