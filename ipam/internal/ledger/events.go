package ledger

import (
	"context"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/capi-monolith/capi-monolith/ipam/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/ipam/internal/index"
)

// Watch keeps the ledger current from the shared cache's allocation record
// informer: records created by anyone (another manager, a shard, a replica
// before a failover) take their address, released ones cool it down,
// deleted ones free it. IPAddresses are not watched: they say what a claim
// was given, never who may have an address.
func (l *Ledger) Watch(ctx context.Context, c cache.Cache) error {
	informer, err := c.GetInformer(ctx, &v1alpha1.MonolithIPAllocation{})
	if err != nil {
		return err
	}
	_, err = informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { l.OnExists(obj) },
		UpdateFunc: func(_, obj any) { l.OnExists(obj) },
		DeleteFunc: func(obj any) { l.OnDeleted(obj) },
	})
	return err
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
