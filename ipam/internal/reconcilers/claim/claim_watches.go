package claim

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/capi-monolith/capi-monolith/ipam/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/ipam/internal/index"
	"github.com/capi-monolith/capi-monolith/ipam/internal/metrics"
)

// addressEvents brings an IPAddress's claim back on every change, and on a
// deletion also the claims waiting for an address of the same pool.
func (r *Reconciler) addressEvents() handler.EventHandler {
	enqueueClaim := func(o client.Object, q workqueue.TypedRateLimitingInterface[ctrl.Request]) {
		a, ok := o.(*ipamv1.IPAddress)
		if !ok {
			return
		}
		if _, ours := index.KeyOfRef(a.Spec.PoolRef, a.Namespace); !ours || a.Spec.ClaimRef.Name == "" {
			return
		}
		q.Add(ctrl.Request{NamespacedName: types.NamespacedName{Namespace: a.Namespace, Name: a.Spec.ClaimRef.Name}})
	}
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[ctrl.Request]) {
			// The first list's IPAddresses are the claims' business: each
			// claim of the first list comes on its own (a settled one
			// through the startup backlog), and a claim with no object has
			// nothing to reconcile.
			if !e.IsInInitialList {
				enqueueClaim(e.Object, q)
			}
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[ctrl.Request]) {
			enqueueClaim(e.ObjectNew, q)
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[ctrl.Request]) {
			enqueueClaim(e.Object, q)
			if a, ok := e.Object.(*ipamv1.IPAddress); ok {
				if key, ours := index.KeyOfRef(a.Spec.PoolRef, a.Namespace); ours {
					r.enqueueWaiting(ctx, key, q)
				}
			}
		},
	}
}

// poolToWaitingClaims brings back the claims of a pool that still wait for
// an address (or for their release) when the pool's spec or pause changes,
// and every claim of a pool that appears: a pool deleted and re-created
// (skip-delete-protection) lost its records, which its bound claims record
// again. A pool of the first list brings only the waiting ones: the
// claims of the first list each come on their own.
func (r *Reconciler) poolToWaitingClaims() handler.EventHandler {
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[ctrl.Request]) {
			if p, ok := e.Object.(v1alpha1.Pool); ok {
				r.enqueueClaims(ctx, index.KeyOf(p), q, !e.IsInInitialList)
			}
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[ctrl.Request]) {
			r.enqueuePool(ctx, e.ObjectNew, q)
		},
	}
}

func (r *Reconciler) enqueuePool(ctx context.Context, o client.Object, q workqueue.TypedRateLimitingInterface[ctrl.Request]) {
	if p, ok := o.(v1alpha1.Pool); ok {
		r.enqueueWaiting(ctx, index.KeyOf(p), q)
	}
}

func (r *Reconciler) enqueueWaiting(ctx context.Context, key index.PoolKey, q workqueue.TypedRateLimitingInterface[ctrl.Request]) {
	r.enqueueClaims(ctx, key, q, false)
}

// enqueueClaims brings back the pool's claims that wait, or all of them.
func (r *Reconciler) enqueueClaims(ctx context.Context, key index.PoolKey, q workqueue.TypedRateLimitingInterface[ctrl.Request], all bool) {
	claims := &ipamv1.IPAddressClaimList{}
	if err := r.Client.List(ctx, claims, client.MatchingFields{index.ClaimPoolField: key.String()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Failed to list the claims of a pool", "pool", key.String())
		return
	}
	for i := range claims.Items {
		c := &claims.Items[i]
		if all || c.Status.AddressRef.Name == "" || !c.DeletionTimestamp.IsZero() {
			q.Add(ctrl.Request{NamespacedName: client.ObjectKeyFromObject(c)})
		}
	}
}

func allocationDuration(d time.Duration) {
	metrics.AllocationDuration.Observe(d.Seconds())
}

// clusterToClaims brings back a Cluster's claims, whether they name it in
// spec.clusterName or only by label.
func (r *Reconciler) clusterToClaims() handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []ctrl.Request {
		claims := &ipamv1.IPAddressClaimList{}
		if err := r.Client.List(ctx, claims, client.InNamespace(o.GetNamespace()), client.MatchingFields{index.ClaimClusterField: o.GetName()}); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Failed to list the claims of a Cluster", "Cluster", klog.KObj(o))
			return nil
		}
		reqs := make([]ctrl.Request, 0, len(claims.Items))
		for i := range claims.Items {
			reqs = append(reqs, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(&claims.Items[i])})
		}
		return reqs
	})
}

// releasedClaimToWaitingClaims wakes the claims waiting on a pool when a
// claim of it is finally gone: its address was released just before.
func (r *Reconciler) releasedClaimToWaitingClaims() handler.EventHandler {
	return handler.Funcs{
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[ctrl.Request]) {
			c, ok := e.Object.(*ipamv1.IPAddressClaim)
			if !ok {
				return
			}
			if key, ours := index.KeyOfRef(c.Spec.PoolRef, c.Namespace); ours {
				r.enqueueWaiting(ctx, key, q)
			}
		},
	}
}

// releasedRecordToWaitingClaims wakes the claims waiting on a pool when an
// address of it is released or freed, by any manager: a shard serving other
// namespaces sees none of their claims go, but sees their records.
func (r *Reconciler) releasedRecordToWaitingClaims() handler.EventHandler {
	enqueue := func(ctx context.Context, o client.Object, q workqueue.TypedRateLimitingInterface[ctrl.Request]) {
		if rec, ok := o.(*v1alpha1.MonolithIPAllocation); ok {
			r.enqueueWaiting(ctx, index.KeyOfAllocation(rec), q)
		}
	}
	return handler.Funcs{
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[ctrl.Request]) {
			if rec, ok := e.ObjectNew.(*v1alpha1.MonolithIPAllocation); ok && rec.IsReleased() {
				enqueue(ctx, rec, q)
			}
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[ctrl.Request]) {
			enqueue(ctx, e.Object, q)
		},
	}
}
