package ledger

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/capi-monolith/capi-monolith/ipam/index"
)

// claimLookupTimeout bounds the cache read of a deleted IPAddress's claim.
const claimLookupTimeout = 5 * time.Second

// Watch keeps the ledger current from the shared cache's IPAddress
// informer: addresses created by anyone (another replica before a failover,
// `clusterctl move`) are marked used, deleted ones released.
func (l *Ledger) Watch(ctx context.Context, c cache.Cache) error {
	informer, err := c.GetInformer(ctx, &ipamv1.IPAddress{})
	if err != nil {
		return err
	}
	_, err = informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { l.onExists(obj) },
		UpdateFunc: func(_, obj any) { l.onExists(obj) },
		DeleteFunc: func(obj any) { l.onDeleted(ctx, obj) },
	})
	return err
}

func (l *Ledger) pool(a *ipamv1.IPAddress) *Pool {
	key, ok := index.KeyOfRef(a.Spec.PoolRef, a.Namespace)
	if !ok {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pools[key]
}

func (l *Ledger) onExists(obj any) {
	if a, ok := obj.(*ipamv1.IPAddress); ok {
		if p := l.pool(a); p != nil {
			p.observe(a)
		}
	}
}

func (l *Ledger) onDeleted(ctx context.Context, obj any) {
	if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	a, ok := obj.(*ipamv1.IPAddress)
	if !ok {
		return
	}
	p := l.pool(a)
	if p == nil {
		return
	}
	p.release(a, l.claimAlive(ctx, a))
}

// claimAlive tells whether the IPAddress's claim exists and is not being
// deleted: its address must then come back, identical.
func (l *Ledger) claimAlive(ctx context.Context, a *ipamv1.IPAddress) bool {
	// Bounded: this runs on the informer's handler goroutine, and a cache
	// read must not hold it (or the manager's shutdown) forever.
	ctx, cancel := context.WithTimeout(ctx, claimLookupTimeout)
	defer cancel()
	claim := &ipamv1.IPAddressClaim{}
	err := l.reader.Get(ctx, claimOf(a), claim)
	if err != nil {
		if !apierrors.IsNotFound(err) {
			// Keeping the address held is the safe side: a leak shows in
			// the pool status, a duplicate does harm.
			ctrl.LoggerFrom(ctx).Error(err, "Failed to read the claim of a deleted IPAddress; keeping its address held", "IPAddress", a.Namespace+"/"+a.Name)
			return true
		}
		return false
	}
	return claim.DeletionTimestamp.IsZero()
}
