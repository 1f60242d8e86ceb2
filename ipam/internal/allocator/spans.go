package allocator

import (
	"math/rand/v2"
	"net/netip"
)

// spanTree is the free space of a pool: disjoint, non-adjacent runs of free
// addresses, ordered by first address. It is a treap so that finding the
// lowest free address, splitting a run on allocation and merging runs on
// release are all O(log n) in the number of runs, whatever their order; a
// sorted slice would need an O(n) copy to insert a run near the front.
//
// Runs are never empty, and two runs never touch: a run ending right
// before another one starts is merged with it.
type spanTree struct {
	root *span
}

type span struct {
	from, to    netip.Addr // inclusive
	prio        uint64
	left, right *span
}

// add inserts the run [from, to], which must not overlap or touch another.
func (t *spanTree) add(from, to netip.Addr) {
	l, r := split(t.root, from)
	t.root = merge(merge(l, &span{from: from, to: to, prio: rand.Uint64()}), r)
}

// delete removes the run that starts at from.
func (t *spanTree) delete(from netip.Addr) {
	t.root = deleteSpan(t.root, from)
}

// first returns the run holding the lowest free address.
func (t *spanTree) first() *span {
	n := t.root
	if n == nil {
		return nil
	}
	for n.left != nil {
		n = n.left
	}
	return n
}

// floor returns the last run starting at or before addr.
func (t *spanTree) floor(addr netip.Addr) *span {
	var best *span
	for n := t.root; n != nil; {
		if addr.Less(n.from) {
			n = n.left
		} else {
			best, n = n, n.right
		}
	}
	return best
}

// takeFirst removes and returns the lowest free address.
func (t *spanTree) takeFirst() (netip.Addr, bool) {
	s := t.first()
	if s == nil {
		return netip.Addr{}, false
	}
	addr := s.from
	t.take(s, addr)
	return addr, true
}

// takeAddr removes addr from the free space; it reports false if addr was
// not free.
func (t *spanTree) takeAddr(addr netip.Addr) bool {
	s := t.floor(addr)
	if s == nil || s.to.Less(addr) {
		return false
	}
	t.take(s, addr)
	return true
}

func (t *spanTree) take(s *span, addr netip.Addr) {
	// Moving a run's start within the run keeps the tree ordered, because
	// runs never overlap; only a split needs a new node.
	switch {
	case s.from == s.to:
		t.delete(s.from)
	case addr == s.from:
		s.from = addr.Next()
	case addr == s.to:
		s.to = addr.Prev()
	default:
		end := s.to
		s.to = addr.Prev()
		t.add(addr.Next(), end)
	}
}

// put returns addr, which must not be free, to the free space, merging it
// with the runs on either side.
func (t *spanTree) put(addr netip.Addr) {
	before := t.floor(addr)
	joinsBefore := before != nil && before.to.Next() == addr
	var after *span
	if next := addr.Next(); next.IsValid() {
		if s := t.floor(next); s != nil && s.from == next {
			after = s
		}
	}
	switch {
	case joinsBefore && after != nil:
		before.to = after.to
		t.delete(after.from)
	case joinsBefore:
		before.to = addr
	case after != nil:
		after.from = addr
	default:
		t.add(addr, addr)
	}
}

// split divides n into the runs starting before key and the rest.
func split(n *span, key netip.Addr) (lo, hi *span) {
	if n == nil {
		return nil, nil
	}
	if n.from.Less(key) {
		n.right, hi = split(n.right, key)
		return n, hi
	}
	lo, n.left = split(n.left, key)
	return lo, n
}

// merge joins two treaps where every run in lo precedes every run in hi.
func merge(lo, hi *span) *span {
	switch {
	case lo == nil:
		return hi
	case hi == nil:
		return lo
	case lo.prio > hi.prio:
		lo.right = merge(lo.right, hi)
		return lo
	default:
		hi.left = merge(lo, hi.left)
		return hi
	}
}

func deleteSpan(n *span, from netip.Addr) *span {
	if n == nil {
		return nil
	}
	switch c := from.Compare(n.from); {
	case c < 0:
		n.left = deleteSpan(n.left, from)
	case c > 0:
		n.right = deleteSpan(n.right, from)
	default:
		return merge(n.left, n.right)
	}
	return n
}
