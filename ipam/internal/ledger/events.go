package ledger

import (
	"context"
	"fmt"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/capi-monolith/capi-monolith/ipam/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/ipam/internal/index"
)

// Watch keeps the ledger current from the shared cache's allocation record
// and IPAddress informers: records created by anyone (another manager, a
// shard, a replica before a failover) take their address, released ones
// cool it down, deleted ones free it; an IPAddress naming a pool holds its
// address while it exists, whoever made it.
func (l *Ledger) Watch(ctx context.Context, c cache.Cache) error {
	informer, err := c.GetInformer(ctx, &v1alpha1.MonolithIPAllocation{})
	if err != nil {
		return fmt.Errorf("failed to get the allocation record informer: %w", err)
	}
	if _, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { l.OnExists(obj) },
		UpdateFunc: func(_, obj any) { l.OnExists(obj) },
		DeleteFunc: func(obj any) { l.OnDeleted(obj) },
	}); err != nil {
		return fmt.Errorf("failed to watch allocation records: %w", err)
	}
	addresses, err := c.GetInformer(ctx, &ipamv1.IPAddress{})
	if err != nil {
		return fmt.Errorf("failed to get the IPAddress informer: %w", err)
	}
	if _, err := addresses.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { l.OnAddressExists(obj) },
		UpdateFunc: func(_, obj any) { l.OnAddressExists(obj) },
		DeleteFunc: func(obj any) { l.OnAddressDeleted(obj) },
	}); err != nil {
		return fmt.Errorf("failed to watch IPAddresses: %w", err)
	}
	return nil
}

func (l *Ledger) poolOfAddress(a *ipamv1.IPAddress) *Pool {
	key, ours := index.KeyOfRef(a.Spec.PoolRef, a.Namespace)
	if !ours {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pools[key]
}

// OnAddressExists handles an IPAddress's add or update event.
func (l *Ledger) OnAddressExists(obj any) {
	if a, ok := obj.(*ipamv1.IPAddress); ok {
		if p := l.poolOfAddress(a); p != nil {
			p.ObserveAddress(a)
		}
	}
}

// OnAddressDeleted handles an IPAddress's delete event.
func (l *Ledger) OnAddressDeleted(obj any) {
	if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if a, ok := obj.(*ipamv1.IPAddress); ok {
		if p := l.poolOfAddress(a); p != nil {
			p.ForgetAddress(a)
		}
	}
}

func (l *Ledger) pool(r *v1alpha1.MonolithIPAllocation) *Pool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pools[index.KeyOfAllocation(r)]
}

// OnExists handles a record's add or update event.
func (l *Ledger) OnExists(obj any) {
	if r, ok := obj.(*v1alpha1.MonolithIPAllocation); ok {
		if p := l.pool(r); p != nil {
			p.Observe(r)
		}
	}
}

// OnDeleted handles a record's delete event.
func (l *Ledger) OnDeleted(obj any) {
	if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if r, ok := obj.(*v1alpha1.MonolithIPAllocation); ok {
		if p := l.pool(r); p != nil {
			p.Forget(r)
		}
	}
}
