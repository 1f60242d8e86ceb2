// Package ledger is the ipam module's authoritative record of which address
// each pool has handed out, and to which claim.
//
// It keeps one allocator per pool, built from the IPAddresses in the shared
// cache the first time the pool is used, rebuilt when the pool's spec
// changes, and kept current by the IPAddress informer's events. Allocations
// made by this process are recorded before the IPAddress is even created,
// so two reconciles never pick the same address, whatever the cache has
// seen yet. Next-free costs O(log n); nothing is re-listed per claim.
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

	"github.com/capi-monolith/capi-monolith/ipam/allocator"
	"github.com/capi-monolith/capi-monolith/ipam/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/ipam/index"
)

// ErrInvalidPool wraps the reasons a pool's spec cannot be used.
var ErrInvalidPool = errors.New("invalid pool")

// Ledger holds the state of every pool this process has seen.
type Ledger struct {
	// reader is the shared cache, with index.IPAddressPoolField registered.
	reader client.Reader

	mu    sync.Mutex
	pools map[index.PoolKey]*Pool
}

// New returns an empty ledger reading IPAddresses from reader.
func New(reader client.Reader) *Ledger {
	return &Ledger{reader: reader, pools: map[index.PoolKey]*Pool{}}
}

// Pool is the state of one pool: its allocator and who holds what.
type Pool struct {
	key index.PoolKey

	// mu serialises (re)builds and guards holds; allocations themselves
	// are serialised by the allocator alone.
	mu    sync.Mutex
	spec  v1alpha1.IPPoolSpec
	alloc *allocator.Allocator
	// holds maps each held address to its claim, and claims back to it, so
	// that an IPAddress deleted while its claim lives is re-created with
	// the same address.
	holds  map[netip.Addr]types.NamespacedName
	claims map[types.NamespacedName]netip.Addr
}

// For returns the state of pool, building it from the cache on first use and
// rebuilding it when the pool's spec changed. A spec that does not parse
// returns an error wrapping ErrInvalidPool.
func (l *Ledger) For(ctx context.Context, pool v1alpha1.Pool) (*Pool, error) {
	key := index.KeyOf(pool)
	l.mu.Lock()
	p, ok := l.pools[key]
	if !ok {
		p = &Pool{key: key}
		l.pools[key] = p
	}
	l.mu.Unlock()

	p.mu.Lock()
	defer p.mu.Unlock()
	if p.alloc != nil && reflect.DeepEqual(p.spec, *pool.GetSpec()) {
		return p, nil
	}
	if err := p.rebuild(ctx, l.reader, *pool.GetSpec()); err != nil {
		return nil, err
	}
	return p, nil
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

// rebuild makes a new allocator for spec from the IPAddresses in the cache,
// keeping every address the old allocator handed out: some of them may not
// be in the cache yet.
func (p *Pool) rebuild(ctx context.Context, reader client.Reader, spec v1alpha1.IPPoolSpec) error {
	parsed, err := Parse(spec)
	if err != nil {
		p.alloc = nil
		return err
	}
	addresses := &ipamv1.IPAddressList{}
	if err := reader.List(ctx, addresses, client.MatchingFields{index.IPAddressPoolField: p.key.String()}); err != nil {
		return fmt.Errorf("failed to list the IPAddresses of pool %s: %w", p.key, err)
	}
	alloc := allocator.NewWithOptions(parsed, allocator.Options{
		GracePeriod: time.Duration(spec.AddressReuseGracePeriodSeconds) * time.Second,
	})
	holds := map[netip.Addr]types.NamespacedName{}
	claims := map[types.NamespacedName]netip.Addr{}
	if p.alloc != nil {
		for _, a := range p.alloc.Held() {
			alloc.MarkUsed(a)
			if c, ok := p.holds[a]; ok {
				holds[a], claims[c] = c, a
			}
		}
	}
	for i := range addresses.Items {
		a := &addresses.Items[i]
		addr, err := netip.ParseAddr(a.Spec.Address)
		if err != nil {
			continue // not ours to judge; the pool status shows it nowhere
		}
		alloc.MarkUsed(addr)
		c := claimOf(a)
		holds[addr], claims[c] = c, addr
	}
	p.spec, p.alloc, p.holds, p.claims = spec, alloc, holds, claims
	return nil
}

func claimOf(a *ipamv1.IPAddress) types.NamespacedName {
	return types.NamespacedName{Namespace: a.Namespace, Name: a.Spec.ClaimRef.Name}
}

// Key returns the pool's key.
func (p *Pool) Key() index.PoolKey { return p.key }

// Allocator returns the pool's allocator, for read-only questions (counts,
// the next reusable time).
func (p *Pool) Allocator() *allocator.Allocator {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.alloc
}

// Prefix and Gateway are what every IPAddress of the pool carries.
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

// AddressOf returns the address held for claim, if any.
func (p *Pool) AddressOf(claim types.NamespacedName) (netip.Addr, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	a, ok := p.claims[claim]
	return a, ok
}

// Allocate takes an address for claim: the one it already holds, else
// requested when valid, else the lowest free one.
func (p *Pool) Allocate(claim types.NamespacedName, requested netip.Addr) (netip.Addr, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
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

// Cancel undoes an allocation whose IPAddress could not be created.
func (p *Pool) Cancel(claim types.NamespacedName, addr netip.Addr) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.holds[addr] != claim {
		return
	}
	delete(p.holds, addr)
	delete(p.claims, claim)
	p.alloc.Unallocate(addr)
}

// observe records an IPAddress that exists.
func (p *Pool) observe(a *ipamv1.IPAddress) {
	addr, err := netip.ParseAddr(a.Spec.Address)
	if err != nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.alloc == nil {
		return // built from the cache on first use
	}
	p.alloc.MarkUsed(addr)
	c := claimOf(a)
	p.holds[addr], p.claims[c] = c, addr
}

// release gives back the address of a deleted IPAddress, unless its claim
// still lives: then the address stays held to re-create it identically.
func (p *Pool) release(a *ipamv1.IPAddress, claimAlive bool) {
	addr, err := netip.ParseAddr(a.Spec.Address)
	if err != nil || claimAlive {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.alloc == nil {
		return
	}
	// Only an address still held for this IPAddress's claim is released: a
	// late event must never free an address already handed to another
	// claim after the reconciler released it.
	c := claimOf(a)
	if held, ok := p.holds[addr]; ok && held != c {
		return
	}
	delete(p.holds, addr)
	delete(p.claims, c)
	p.alloc.Release(addr)
}

// ReleaseClaim gives back whatever claim still holds, once the claim is
// going and its IPAddress is already gone.
func (p *Pool) ReleaseClaim(claim types.NamespacedName) {
	p.mu.Lock()
	defer p.mu.Unlock()
	addr, ok := p.claims[claim]
	if !ok {
		return
	}
	delete(p.claims, claim)
	delete(p.holds, addr)
	p.alloc.Release(addr)
}

// GracePeriodSeconds returns the pool's address reuse grace period.
func (p *Pool) GracePeriodSeconds() int32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.spec.AddressReuseGracePeriodSeconds
}
