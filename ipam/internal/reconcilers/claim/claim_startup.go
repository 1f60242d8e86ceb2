package claim

import (
	"context"
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/capi-monolith/capi-monolith/ipam/api/v1alpha1"
)

const (
	// backlogLowWater is how few requests the workqueue must hold before
	// the backlog of settled claims is let in: a claim that needs an
	// address waits behind at most about this many no-op reconciles.
	backlogLowWater = 20
	// backlogPace is how often the backlog feeder looks at the queue.
	backlogPace = 5 * time.Millisecond
)

// settled tells whether a claim, as its object shows, needs nothing from
// us: bound, Ready, with our finalizer, not being deleted. Its reconcile
// only confirms that.
func settled(o client.Object) bool {
	c, ok := o.(*ipamv1.IPAddressClaim)
	return ok && c.DeletionTimestamp.IsZero() && c.Status.AddressRef.Name != "" &&
		containsString(c.Finalizers, v1alpha1.ReleaseAddressFinalizer) &&
		conditions.IsTrue(c, ipamv1.IPAddressClaimReadyCondition)
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// startupBacklog is a second lane in front of client-go's FIFO workqueue
// (controller-runtime's priority queue stays off, see manager.go): the
// claims a starting process finds already settled are reconciled once, as
// always, but only while the queue is nearly empty, so that a claim
// waiting for an address is never queued behind thousands of no-op
// reconciles of a restart.
type startupBacklog struct {
	mu      sync.Mutex
	pending []ctrl.Request
	feeding bool
}

// isSettledAtStart is true for the create events of the informer's first
// list whose claim is settled: those go through the backlog instead.
func isSettledAtStart(e event.CreateEvent) bool {
	return e.IsInInitialList && settled(e.Object)
}

// notSettledAtStart keeps the settled claims of the first list away from
// the controller's own handler.
func notSettledAtStart() predicate.Predicate {
	return predicate.Funcs{CreateFunc: func(e event.CreateEvent) bool { return !isSettledAtStart(e) }}
}

// handler queues the settled claims of the first list in the backlog.
func (b *startupBacklog) handler() handler.EventHandler {
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[ctrl.Request]) {
			if isSettledAtStart(e) {
				b.add(ctrl.Request{NamespacedName: client.ObjectKeyFromObject(e.Object)}, q)
			}
		},
	}
}

func (b *startupBacklog) add(req ctrl.Request, q workqueue.TypedRateLimitingInterface[ctrl.Request]) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.pending = append(b.pending, req)
	if !b.feeding {
		b.feeding = true
		go b.feed(q)
	}
}

// feed lets the backlog into q, oldest first, whenever q holds fewer than
// backlogLowWater requests, until the backlog is empty or q shuts down.
// (The handler's context is no bound: controller-runtime ends it once the
// sources have started.)
func (b *startupBacklog) feed(q workqueue.TypedRateLimitingInterface[ctrl.Request]) {
	tick := time.NewTicker(backlogPace)
	defer tick.Stop()
	for {
		b.mu.Lock()
		for len(b.pending) > 0 && q.Len() < backlogLowWater {
			q.Add(b.pending[0])
			b.pending = b.pending[1:]
		}
		if len(b.pending) == 0 || q.ShuttingDown() {
			b.pending, b.feeding = nil, false
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		<-tick.C
	}
}
