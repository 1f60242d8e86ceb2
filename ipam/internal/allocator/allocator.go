package allocator

import (
	"container/heap"
	"errors"
	"fmt"
	"math/big"
	"net/netip"
	"sync"
	"time"
)

// Allocation errors; they come wrapped with the address or pool concerned,
// so test for them with errors.Is.
var (
	ErrExhausted     = errors.New("no free address left in the pool")
	ErrNotInPool     = errors.New("address is not allocatable in this pool")
	ErrInUse         = errors.New("address is already in use")
	ErrInGracePeriod = errors.New("address was released recently and is still in its reuse grace period")
)

// Options tune an Allocator. The zero value gives immediate reuse and the
// system clock.
type Options struct {
	// GracePeriod keeps a released address away from Allocate for this
	// long, so that a host still holding a stale lease, or an ARP cache
	// still pointing at the old host, does not collide with the new one.
	GracePeriod time.Duration
	// Now replaces time.Now, for tests.
	Now func() time.Time
}

// Allocator is the authoritative record of which addresses of one pool are
// taken. It is safe for concurrent use.
//
// Addresses released while a grace period is set cool down before Allocate
// hands them out again. Cooling-down addresses are not free: Counts reports
// them as Used, because nothing else may take them yet.
type Allocator struct {
	pool  *Pool
	grace time.Duration
	now   func() time.Time

	mu         sync.Mutex
	free       spanTree
	used       map[netip.Addr]struct{}
	outOfRange map[netip.Addr]struct{}
	// cooling maps a released address to when it becomes reusable; expiries
	// orders the same moments so that the next one is found without a scan.
	// expiries may hold stale entries for addresses that were marked used
	// again while cooling; they are dropped when they surface.
	cooling  map[netip.Addr]time.Time
	expiries expiryHeap
}

// New returns an allocator for pool with every allocatable address free.
func New(pool *Pool) *Allocator { return NewWithOptions(pool, Options{}) }

// NewWithOptions is New with a reuse grace period and an injectable clock.
func NewWithOptions(pool *Pool, opts Options) *Allocator {
	a := &Allocator{
		pool:       pool,
		grace:      opts.GracePeriod,
		now:        opts.Now,
		used:       map[netip.Addr]struct{}{},
		outOfRange: map[netip.Addr]struct{}{},
		cooling:    map[netip.Addr]time.Time{},
	}
	if a.now == nil {
		a.now = time.Now
	}
	for _, r := range pool.IPSet().Ranges() {
		a.free.add(r.From(), r.To())
	}
	return a
}

// Pool returns the pool this allocator hands out addresses from.
func (a *Allocator) Pool() *Pool { return a.pool }

// Allocate takes the lowest free address.
func (a *Allocator) Allocate() (netip.Addr, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.reclaim()
	addr, ok := a.free.takeFirst()
	if !ok {
		if n := len(a.cooling); n > 0 {
			return netip.Addr{}, fmt.Errorf("pool %s, %d released addresses still cooling down: %w", a.pool.subnet, n, ErrExhausted)
		}
		return netip.Addr{}, fmt.Errorf("pool %s: %w", a.pool.subnet, ErrExhausted)
	}
	a.used[addr] = struct{}{}
	return addr, nil
}

// AllocateSpecific takes addr, for claims that ask for a fixed address.
func (a *Allocator) AllocateSpecific(addr netip.Addr) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.pool.Contains(addr) {
		return fmt.Errorf("%s %s in pool %s: %w", addr, a.pool.whyNotAllocatable(addr), a.pool.subnet, ErrNotInPool)
	}
	a.reclaim()
	if _, ok := a.used[addr]; ok {
		return fmt.Errorf("%s: %w", addr, ErrInUse)
	}
	if at, ok := a.cooling[addr]; ok {
		return fmt.Errorf("%s is reusable from %s: %w", addr, at.Format(time.RFC3339), ErrInGracePeriod)
	}
	a.free.takeAddr(addr)
	a.used[addr] = struct{}{}
	return nil
}

// MarkUsed records an address that is already handed out, e.g. an existing
// IPAddress found at start-up or through an informer. It is idempotent and
// cuts a grace period short, since the address is demonstrably taken.
//
// Addresses the pool cannot hand out (outside it, excluded or reserved) are
// still remembered, as out of range, so that the pool's status can show
// them without them eating into the free count. inPool tells which case
// applied.
func (a *Allocator) MarkUsed(addr netip.Addr) (inPool bool) {
	if !addr.IsValid() {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.pool.Contains(addr) {
		a.outOfRange[addr] = struct{}{}
		return false
	}
	if _, ok := a.used[addr]; ok {
		return true
	}
	if _, ok := a.cooling[addr]; ok {
		delete(a.cooling, addr)
	} else {
		a.free.takeAddr(addr)
	}
	a.used[addr] = struct{}{}
	return true
}

// Release gives addr back. Releasing an address that is not held is a
// no-op, so deletions can be replayed safely.
func (a *Allocator) Release(addr netip.Addr) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.outOfRange[addr]; ok {
		delete(a.outOfRange, addr)
		return
	}
	if _, ok := a.used[addr]; !ok {
		return
	}
	delete(a.used, addr)
	if a.grace <= 0 {
		a.free.put(addr)
		return
	}
	at := a.now().Add(a.grace)
	a.cooling[addr] = at
	heap.Push(&a.expiries, expiry{at: at, addr: addr})
}

// ReleaseUntil gives back addr with its grace period ending at the given
// time rather than the allocator's own, for an address whose release was
// recorded elsewhere (an allocation record read after a restart). A time in
// the past frees it at once. Addresses the pool cannot hand out are simply
// forgotten.
func (a *Allocator) ReleaseUntil(addr netip.Addr, at time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.outOfRange[addr]; ok {
		delete(a.outOfRange, addr)
		return
	}
	if !a.pool.Contains(addr) {
		return
	}
	if _, ok := a.used[addr]; ok {
		delete(a.used, addr)
	} else if _, ok := a.cooling[addr]; !ok {
		a.free.takeAddr(addr)
	}
	if !at.After(a.now()) {
		delete(a.cooling, addr)
		a.free.put(addr)
		return
	}
	a.cooling[addr] = at
	heap.Push(&a.expiries, expiry{at: at, addr: addr})
}

// GracePeriod returns the allocator's reuse grace period.
func (a *Allocator) GracePeriod() time.Duration { return a.grace }

// IsUsed reports whether addr is held, in the pool or out of range.
// A cooling-down address is not held; see InGracePeriod.
func (a *Allocator) IsUsed(addr netip.Addr) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, used := a.used[addr]
	_, out := a.outOfRange[addr]
	return used || out
}

// InGracePeriod reports whether addr was released and may not be reused yet.
func (a *Allocator) InGracePeriod(addr netip.Addr) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.reclaim()
	_, ok := a.cooling[addr]
	return ok
}

// NextReusable returns when the earliest cooling-down address becomes free,
// so that a claim waiting on an exhausted pool can be requeued for then.
// ok is false when nothing is cooling down.
func (a *Allocator) NextReusable() (at time.Time, ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.reclaim()
	a.dropStale()
	if len(a.expiries) == 0 {
		return time.Time{}, false
	}
	return a.expiries[0].at, true
}

// Counts describes a pool's occupancy. Total and Free can exceed int64 in
// IPv6 pools, hence big.Int.
type Counts struct {
	// Total is the number of allocatable addresses.
	Total *big.Int
	// Used is the number of in-pool addresses that are held or cooling
	// down after a release.
	Used *big.Int
	// Free is Total - Used.
	Free *big.Int
	// OutOfRange is the number of held addresses the pool cannot hand out.
	OutOfRange int
}

// Int64Counts is Counts squeezed into int64s for status fields and metrics.
type Int64Counts struct {
	Total, Used, Free int64
	OutOfRange        int
	// Capped tells that at least one value was larger than math.MaxInt64
	// and reads math.MaxInt64 instead.
	Capped bool
}

// Int64 caps each count at math.MaxInt64.
func (c Counts) Int64() Int64Counts {
	var out Int64Counts
	var capped [3]bool
	out.Total, capped[0] = capInt64(c.Total)
	out.Used, capped[1] = capInt64(c.Used)
	out.Free, capped[2] = capInt64(c.Free)
	out.OutOfRange = c.OutOfRange
	out.Capped = capped[0] || capped[1] || capped[2]
	return out
}

// Counts returns the pool's current occupancy.
func (a *Allocator) Counts() Counts {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.reclaim()
	total := a.pool.Size()
	used := big.NewInt(int64(len(a.used) + len(a.cooling)))
	return Counts{
		Total:      total,
		Used:       used,
		Free:       new(big.Int).Sub(total, used),
		OutOfRange: len(a.outOfRange),
	}
}

// reclaim frees the addresses whose grace period is over. It runs lazily
// at the start of each call that depends on it, so no timer is needed.
func (a *Allocator) reclaim() {
	if len(a.expiries) == 0 {
		return
	}
	now := a.now()
	for len(a.expiries) > 0 && !now.Before(a.expiries[0].at) {
		e := heap.Pop(&a.expiries).(expiry)
		if at, ok := a.cooling[e.addr]; ok && at.Equal(e.at) {
			delete(a.cooling, e.addr)
			a.free.put(e.addr)
		}
	}
}

// dropStale removes heap entries left behind by MarkUsed on a cooling
// address, so the top of the heap is a real expiry.
func (a *Allocator) dropStale() {
	for len(a.expiries) > 0 {
		e := a.expiries[0]
		if at, ok := a.cooling[e.addr]; ok && at.Equal(e.at) {
			return
		}
		heap.Pop(&a.expiries)
	}
}

type expiry struct {
	at   time.Time
	addr netip.Addr
}

type expiryHeap []expiry

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h expiryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *expiryHeap) Push(x any)        { *h = append(*h, x.(expiry)) }
func (h *expiryHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// Unallocate undoes an allocation that was never used, e.g. when creating
// the IPAddress object failed: the address is free again at once, without a
// grace period, since no host ever held it.
func (a *Allocator) Unallocate(addr netip.Addr) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.used[addr]; !ok {
		return
	}
	delete(a.used, addr)
	a.free.put(addr)
}

// Held returns every held address, in the pool or out of range, so that an
// allocator rebuilt for a changed pool keeps what this one handed out.
func (a *Allocator) Held() []netip.Addr {
	a.mu.Lock()
	defer a.mu.Unlock()
	held := make([]netip.Addr, 0, len(a.used)+len(a.outOfRange))
	for addr := range a.used {
		held = append(held, addr)
	}
	for addr := range a.outOfRange {
		held = append(held, addr)
	}
	return held
}
