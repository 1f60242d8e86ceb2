package allocator

import (
	"math/rand/v2"
	"net/netip"
	"testing"

	. "github.com/onsi/gomega"
)

// TestSpanTreeMatchesBitmap drives the treap through thousands of random
// takes and puts over a /16 and checks after each batch that its runs are
// exactly the free addresses of a plain bitmap, in order, never touching,
// and that the treap's heap order on priorities holds.
func TestSpanTreeMatchesBitmap(t *testing.T) {
	g := NewWithT(t)
	const size = 1 << 16
	base := netip.MustParseAddr("10.0.0.0")
	addrs := make([]netip.Addr, size)
	for i, a := 0, base; i < size; i, a = i+1, a.Next() {
		addrs[i] = a
	}
	free := make([]bool, size)
	for i := range free {
		free[i] = true
	}
	var tree spanTree
	tree.add(addrs[0], addrs[size-1])

	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 40 {
		for range 2000 {
			i := rng.IntN(size)
			switch {
			case rng.IntN(4) == 0:
				got, ok := tree.takeFirst()
				lowest := -1
				for j, f := range free {
					if f {
						lowest = j
						break
					}
				}
				g.Expect(ok).To(Equal(lowest >= 0))
				if ok {
					g.Expect(got).To(Equal(addrs[lowest]))
					free[lowest] = false
				}
			case free[i]:
				g.Expect(tree.takeAddr(addrs[i])).To(BeTrue())
				free[i] = false
			default:
				g.Expect(tree.takeAddr(addrs[i])).To(BeFalse(), "%s is not free", addrs[i])
				tree.put(addrs[i])
				free[i] = true
			}
		}
		g.Expect(runsOf(tree.root)).To(Equal(bitmapRuns(addrs, free)), "round %d", round)
		checkHeapOrder(t, tree.root)
	}
}

type run struct{ from, to netip.Addr }

func runsOf(n *span) []run {
	if n == nil {
		return nil
	}
	out := runsOf(n.left)
	out = append(out, run{n.from, n.to})
	return append(out, runsOf(n.right)...)
}

func bitmapRuns(addrs []netip.Addr, free []bool) []run {
	var out []run
	for i := 0; i < len(free); i++ {
		if !free[i] {
			continue
		}
		j := i
		for j+1 < len(free) && free[j+1] {
			j++
		}
		out = append(out, run{addrs[i], addrs[j]})
		i = j
	}
	return out
}

func checkHeapOrder(t *testing.T, n *span) {
	t.Helper()
	if n == nil {
		return
	}
	for _, c := range []*span{n.left, n.right} {
		if c != nil && c.prio > n.prio {
			t.Fatalf("child %s-%s outranks its parent %s-%s", c.from, c.to, n.from, n.to)
		}
		checkHeapOrder(t, c)
	}
}
