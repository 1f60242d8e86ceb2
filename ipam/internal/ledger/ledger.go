// Package ledger is the ipam module's fast path: one allocator per pool
// that knows which addresses are taken, so that next-free costs O(log n)
// and nothing is re-listed per claim.
//
// It is a cache, never the authority. The authority is the allocation
// records (MonolithIPAllocation, package records): an address is taken when
// its record exists, whatever any process remembers. The ledger is built
// from the records in the shared cache the first time a pool is used (the
// records are cluster-scoped, so a manager sharded by --namespace or
// --watch-filter still sees every address of a GlobalMonolithIPPool),
// rebuilt when the pool's spec changes, and kept current by the record
// informer. Allocations made by this process are held before their record
// is even created, so two reconciles of one process never try the same
// address; a second process trying it loses at the apiserver.
//
// Every IPAddress in the cache whose poolRef names a pool holds its address
// too, whoever made it and whether or not a record exists for it: another
// allocator, a release from before records, a restore. Such an address is
// never handed out while the IPAddress exists; its deletion frees it only
// when no record (and no other IPAddress) holds it.
package ledger

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/capi-monolith/capi-monolith/ipam/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/ipam/internal/allocator"
	"github.com/capi-monolith/capi-monolith/ipam/internal/index"
	"github.com/capi-monolith/capi-monolith/ipam/internal/records"
)

// ErrInvalidPool wraps the reasons a pool's spec cannot be used.
var ErrInvalidPool = errors.New("invalid pool")

// Ledger holds the state of every pool this process has seen.
type Ledger struct {
	// reader is the shared cache, with index.AllocationPoolField and
	// index.IPAddressPoolField registered.
	reader client.Reader

	mu    sync.Mutex
	pools map[index.PoolKey]*Pool
}

// New returns an empty ledger reading allocation records from reader.
func New(reader client.Reader) *Ledger {
	return &Ledger{reader: reader, pools: map[index.PoolKey]*Pool{}}
}

// Pool is the state of one pool: its allocator and who holds what.
type Pool struct {
	key index.PoolKey

	// mu serialises (re)builds and guards everything below; the allocator
	// has its own lock for read-only questions.
	mu    sync.Mutex
	spec  v1alpha1.IPPoolSpec
	built bool
	// invalid is why the current spec cannot be used; the allocator of the
	// last valid spec is kept, with its holds, so that nothing in flight is
	// lost and releases keep working.
	invalid error
	alloc   *allocator.Allocator
	// holds maps each held address to its claim, and claims back to it.
	holds  map[netip.Addr]records.Claim
	claims map[records.Claim]netip.Addr
	// addresses maps each address that IPAddresses naming the pool hold to
	// those IPAddresses: each holds the address, record or not.
	addresses map[netip.Addr]map[types.NamespacedName]struct{}
	// overlapNamed and plainNamed are the names of the pool's live records
	// named with and without the allow-overlap annotation; a pool whose
	// annotation disagrees with its records hands nothing out.
	overlapNamed, plainNamed map[string]struct{}
}

// For returns the state of pool, building it from the cache on first use and
// rebuilding it when the pool's spec changed. A spec that does not parse
// returns the state (for releases) and an error wrapping ErrInvalidPool:
// nothing may be allocated from it.
func (l *Ledger) For(ctx context.Context, pool v1alpha1.Pool) (*Pool, error) {
	key := index.KeyOf(pool)
	l.mu.Lock()
	p, ok := l.pools[key]
	if !ok {
		p = newPool(key)
		l.pools[key] = p
	}
	l.mu.Unlock()

	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.built || !reflect.DeepEqual(p.spec, *pool.GetSpec()) {
		if err := p.rebuild(ctx, l.reader, *pool.GetSpec()); err != nil {
			return nil, err
		}
	}
	if p.invalid != nil {
		return p, p.invalid
	}
	if err := p.namingMismatch(records.AllowsOverlap(pool)); err != nil {
		return p, err
	}
	return p, nil
}

// ErrOverlapAnnotationChanged is why a pool whose allow-overlap annotation
// changed while it had records hands nothing out: its records are named
// the other way, and records named two ways for one address would let two
// claims hold it.
var ErrOverlapAnnotationChanged = errors.New("the annotation " + v1alpha1.AllowOverlapAnnotation +
	" changed while the pool has allocation records")

// namingMismatch tells whether the pool's live records are named the other
// way than allowOverlap says. Called with p.mu held.
func (p *Pool) namingMismatch(allowOverlap bool) error {
	other := p.plainNamed
	if !allowOverlap {
		other = p.overlapNamed
	}
	if n := len(other); n > 0 {
		return fmt.Errorf("%w: %d records are named as if it were %t; restore it: %w",
			ErrOverlapAnnotationChanged, n, !allowOverlap, ErrInvalidPool)
	}
	return nil
}

// noteName remembers how a live record is named; forgetName drops it.
// Called with p.mu held.
func (p *Pool) noteName(rec *v1alpha1.MonolithIPAllocation) {
	if rec.IsReleased() {
		p.forgetName(rec)
		return
	}
	if records.IsOverlapName(rec.Name) {
		p.overlapNamed[rec.Name] = struct{}{}
	} else {
		p.plainNamed[rec.Name] = struct{}{}
	}
}

func (p *Pool) forgetName(rec *v1alpha1.MonolithIPAllocation) {
	delete(p.overlapNamed, rec.Name)
	delete(p.plainNamed, rec.Name)
}

// heldByAddress tells whether an IPAddress naming the pool holds addr.
// Called with p.mu held.
func (p *Pool) heldByAddress(addr netip.Addr) bool {
	return len(p.addresses[addr]) > 0
}

func newPool(key index.PoolKey) *Pool {
	return &Pool{
		key: key, holds: map[netip.Addr]records.Claim{}, claims: map[records.Claim]netip.Addr{},
		addresses:    map[netip.Addr]map[types.NamespacedName]struct{}{},
		overlapNamed: map[string]struct{}{}, plainNamed: map[string]struct{}{},
	}
}

// Remove forgets a deleted pool.
func (l *Ledger) Remove(key index.PoolKey) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.pools, key)
}

// Parse turns a pool spec into the allocator's pool, wrapping ErrInvalidPool.
func Parse(spec v1alpha1.IPPoolSpec) (*allocator.Pool, error) {
	if spec.AddressReuseGracePeriodSeconds < 0 {
		return nil, fmt.Errorf("%w: addressReuseGracePeriodSeconds must not be negative, got %d", ErrInvalidPool, spec.AddressReuseGracePeriodSeconds)
	}
	parsed, err := allocator.Parse(allocator.Spec{
		Addresses:                   spec.Addresses,
		Prefix:                      int(spec.Prefix),
		Gateway:                     spec.Gateway,
		ExcludedAddresses:           spec.ExcludedAddresses,
		AllocateReservedIPAddresses: spec.AllocateReservedIPAddresses,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidPool, err)
	}
	return parsed, nil
}

// rebuild makes a new allocator for spec from the records in the cache,
// keeping every address the old allocator held: some of their records may
// not be in the cache yet.
func (p *Pool) rebuild(ctx context.Context, reader client.Reader, spec v1alpha1.IPPoolSpec) error {
	parsed, err := Parse(spec)
	if err != nil {
		// Keep the last valid allocator and its holds: an invalid spec
		// must not lose what is in flight.
		p.spec, p.built, p.invalid = spec, true, err
		return nil
	}
	list := &v1alpha1.MonolithIPAllocationList{}
	if err := reader.List(ctx, list, client.MatchingFields{index.AllocationPoolField: p.key.String()}); err != nil {
		return fmt.Errorf("failed to list the allocation records of pool %s: %w", p.key, err)
	}
	ipaddrs := &ipamv1.IPAddressList{}
	if err := reader.List(ctx, ipaddrs, client.MatchingFields{index.IPAddressPoolField: p.key.String()}); err != nil {
		return fmt.Errorf("failed to list the IPAddresses of pool %s: %w", p.key, err)
	}
	alloc := allocator.NewWithOptions(parsed, allocator.Options{
		GracePeriod: time.Duration(spec.AddressReuseGracePeriodSeconds) * time.Second,
	})
	holds := map[netip.Addr]records.Claim{}
	claims := map[records.Claim]netip.Addr{}
	if p.alloc != nil {
		for _, a := range p.alloc.Held() {
			c, ok := p.holds[a]
			if !ok && p.heldByAddress(a) {
				continue // its IPAddresses are listed again below
			}
			alloc.MarkUsed(a)
			if ok {
				holds[a], claims[c] = c, a
			}
		}
	}
	p.overlapNamed, p.plainNamed = map[string]struct{}{}, map[string]struct{}{}
	for i := range list.Items {
		r := &list.Items[i]
		addr, err := netip.ParseAddr(r.Spec.Address)
		if err != nil {
			continue
		}
		p.noteName(r)
		if at, released := records.ReusableAfter(r); released {
			if _, held := holds[addr]; !held {
				alloc.MarkUsed(addr)
				alloc.ReleaseUntil(addr, at)
			}
			continue
		}
		c := records.ClaimOf(r)
		if _, held := holds[addr]; held {
			continue // held by this process; its record wins at the apiserver
		}
		alloc.MarkUsed(addr)
		holds[addr], claims[c] = c, addr
	}
	// IPAddresses last: one of a released record's address cuts its grace
	// period short, as the address is demonstrably in use.
	addresses := map[netip.Addr]map[types.NamespacedName]struct{}{}
	for i := range ipaddrs.Items {
		a := &ipaddrs.Items[i]
		addr, err := netip.ParseAddr(a.Spec.Address)
		if err != nil {
			continue
		}
		alloc.MarkUsed(addr)
		if addresses[addr] == nil {
			addresses[addr] = map[types.NamespacedName]struct{}{}
		}
		addresses[addr][client.ObjectKeyFromObject(a)] = struct{}{}
	}
	p.spec, p.built, p.invalid, p.alloc, p.holds, p.claims, p.addresses = spec, true, nil, alloc, holds, claims, addresses
	return nil
}

// Key returns the pool's key.
func (p *Pool) Key() index.PoolKey { return p.key }

// Allocator returns the pool's allocator, for read-only questions (counts,
// the next reusable time). It is nil only for a pool never valid.
func (p *Pool) Allocator() *allocator.Allocator {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.alloc
}

// Prefix and Gateway are what a new IPAddress of the pool carries.
func (p *Pool) Prefix() int32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.spec.Prefix
}

// Gateway returns the pool's gateway, empty when none.
func (p *Pool) Gateway() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.spec.Gateway
}

// GracePeriod returns the pool's address reuse grace period.
func (p *Pool) GracePeriod() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return time.Duration(p.spec.AddressReuseGracePeriodSeconds) * time.Second
}

// AddressOf returns the address held for claim, if any.
func (p *Pool) AddressOf(claim records.Claim) (netip.Addr, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	a, ok := p.claims[claim]
	return a, ok
}

// Allocate takes an address for claim: the one it already holds, else
// requested when valid, else the lowest free one. The address is the
// claim's only once its record is created.
func (p *Pool) Allocate(claim records.Claim, requested netip.Addr) (netip.Addr, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.invalid != nil || p.alloc == nil {
		return netip.Addr{}, fmt.Errorf("pool %s: %w", p.key, ErrInvalidPool)
	}
	if a, ok := p.claims[claim]; ok {
		if requested.IsValid() && requested != a {
			return netip.Addr{}, fmt.Errorf("claim already holds %s, not the requested %s: %w", a, requested, allocator.ErrInUse)
		}
		return a, nil
	}
	var addr netip.Addr
	if requested.IsValid() {
		if err := p.alloc.AllocateSpecific(requested); err != nil {
			return netip.Addr{}, err
		}
		addr = requested
	} else {
		var err error
		if addr, err = p.alloc.Allocate(); err != nil {
			return netip.Addr{}, err
		}
	}
	p.holds[addr], p.claims[claim] = claim, addr
	return addr, nil
}

// Taken records that claim's tentative address belongs to someone else:
// the apiserver refused its record because rec exists. The address stays
// away from everyone as rec says (held, or cooling down until its time).
func (p *Pool) Taken(claim records.Claim, addr netip.Addr, rec *v1alpha1.MonolithIPAllocation) {
	p.mu.Lock()
	if p.holds[addr] == claim {
		delete(p.holds, addr)
	}
	if p.claims[claim] == addr {
		delete(p.claims, claim)
	}
	p.mu.Unlock()
	p.Observe(rec)
}

// Observe records an allocation record that exists. It never moves an
// address held by another claim: a late event (of a record since deleted,
// a claim since re-created) must not take an address from its live holder.
func (p *Pool) Observe(rec *v1alpha1.MonolithIPAllocation) {
	addr, err := netip.ParseAddr(rec.Spec.Address)
	if err != nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.alloc == nil {
		return // built from the cache on first use
	}
	p.noteName(rec)
	c := records.ClaimOf(rec)
	holder, held := p.holds[addr]
	if at, released := records.ReusableAfter(rec); released {
		if held && holder != c {
			return
		}
		if held {
			delete(p.holds, addr)
			if p.claims[c] == addr {
				delete(p.claims, c)
			}
		}
		p.alloc.MarkUsed(addr)
		if !p.heldByAddress(addr) {
			p.alloc.ReleaseUntil(addr, at)
		}
		return
	}
	if held {
		return // its own holder or another claim's: nothing moves
	}
	p.alloc.MarkUsed(addr)
	p.holds[addr] = c
	if _, ok := p.claims[c]; !ok {
		p.claims[c] = addr
	}
}

// Forget records that an allocation record is gone: its address is free,
// unless it is held by another claim than the record's.
func (p *Pool) Forget(rec *v1alpha1.MonolithIPAllocation) {
	addr, err := netip.ParseAddr(rec.Spec.Address)
	if err != nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.alloc == nil {
		return
	}
	p.forgetName(rec)
	c := records.ClaimOf(rec)
	holder, held := p.holds[addr]
	if held && holder != c {
		return
	}
	if held {
		delete(p.holds, addr)
		if p.claims[c] == addr {
			delete(p.claims, c)
		}
	}
	if p.heldByAddress(addr) {
		return // an IPAddress still has it
	}
	if _, released := records.ReusableAfter(rec); released && !held {
		// A released record goes once its grace period is over; the
		// allocator frees the address itself at that time.
		return
	}
	p.alloc.Unallocate(addr)
}

// ObserveAddress records an IPAddress naming the pool: its address is held
// while it exists, whether or not a record says so.
func (p *Pool) ObserveAddress(a *ipamv1.IPAddress) {
	addr, err := netip.ParseAddr(a.Spec.Address)
	if err != nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.alloc == nil {
		return // built from the cache on first use
	}
	if p.addresses[addr] == nil {
		p.addresses[addr] = map[types.NamespacedName]struct{}{}
	}
	p.addresses[addr][client.ObjectKeyFromObject(a)] = struct{}{}
	p.alloc.MarkUsed(addr)
}

// ForgetAddress records that an IPAddress naming the pool is gone. Its
// address is freed (after the pool's grace period) only when no record and
// no other IPAddress holds it.
func (p *Pool) ForgetAddress(a *ipamv1.IPAddress) {
	addr, err := netip.ParseAddr(a.Spec.Address)
	if err != nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.alloc == nil {
		return
	}
	set := p.addresses[addr]
	if _, ok := set[client.ObjectKeyFromObject(a)]; !ok {
		return
	}
	delete(set, client.ObjectKeyFromObject(a))
	if len(set) > 0 {
		return
	}
	delete(p.addresses, addr)
	if _, held := p.holds[addr]; held {
		return // its record (or this process's allocation) still holds it
	}
	p.alloc.Release(addr)
}

// ReleaseClaim gives back what claim holds, its address cooling down until
// until (the zero time frees it at once). Called once the claim's record
// is released or deleted.
func (p *Pool) ReleaseClaim(claim records.Claim, until time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	addr, ok := p.claims[claim]
	if !ok {
		return
	}
	delete(p.claims, claim)
	if p.holds[addr] == claim {
		delete(p.holds, addr)
		if p.alloc != nil && !p.heldByAddress(addr) {
			p.alloc.ReleaseUntil(addr, until)
		}
	}
}
