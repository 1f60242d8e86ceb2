// Package pool reconciles both pool kinds of the ipam module: it reports
// each pool's address counts and Ready condition, exports them as metrics,
// and holds a pool's deletion while addresses from it are allocated.
package pool

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/capi-monolith/capi-monolith/contracts/scaffold"
	"github.com/capi-monolith/capi-monolith/contracts/watch"
	"github.com/capi-monolith/capi-monolith/ipam/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/ipam/internal/index"
	"github.com/capi-monolith/capi-monolith/ipam/internal/ledger"
	"github.com/capi-monolith/capi-monolith/ipam/internal/metrics"
	"github.com/capi-monolith/capi-monolith/ipam/internal/records"
)

// +kubebuilder:rbac:groups=ipam.cluster.x-k8s.io,resources=monolithippools;globalmonolithippools,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=ipam.cluster.x-k8s.io,resources=monolithippools/status;globalmonolithippools/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=ipam.cluster.x-k8s.io,resources=ipaddresses,verbs=get;list;watch
// +kubebuilder:rbac:groups=ipam.cluster.x-k8s.io,resources=ipaddressclaims,verbs=get;list;watch
// +kubebuilder:rbac:groups=ipam.cluster.x-k8s.io,resources=monolithipallocations,verbs=get;list;watch;delete

const (
	// deletionRecheck is how often a pool held by allocated addresses is
	// looked at again, beside the IPAddress events that normally bring it
	// back.
	deletionRecheck = time.Minute
	// statusBatchDelay is how long a pool waits after one of its addresses
	// changes before its counts are written.
	statusBatchDelay = time.Second
	// sweepInterval is how often a pool's records are checked for claims
	// that are gone without a release.
	sweepInterval = 5 * time.Minute
	// recordPage is how many allocation records one list past the cache
	// reads at a time.
	recordPage = 500
)

// Object is one of our pool kinds.
type Object interface {
	v1alpha1.Pool
	scaffold.Object
}

// Reconciler reconciles one pool kind.
type Reconciler[T Object] struct {
	Client client.Client
	// APIReader confirms, past the cache, that a pool is gone before its
	// records are dropped; nil uses Client.
	APIReader        client.Reader
	Ledger           *ledger.Ledger
	WatchFilterValue string
	// NewObject returns an empty pool of the reconciled kind.
	NewObject func() T
	// Kind is the reconciled kind's name.
	Kind string

	// lastSwept holds when each pool's records were last swept for orphans.
	lastSwept sync.Map
}

// SetupWithManager registers the controller.
func (r *Reconciler[T]) SetupWithManager(ctx context.Context, mgr ctrl.Manager, options controller.Options) error {
	if r.Client == nil || r.Ledger == nil || r.NewObject == nil || r.Kind == "" {
		return errors.New("pool.Reconciler: Client, Ledger, NewObject and Kind are required")
	}
	scaffold, err := scaffold.New(scaffold.OptionsWith[T, results]{
		Client:           r.Client,
		NewObject:        r.NewObject,
		Phases:           r,
		Finalizer:        v1alpha1.ProtectPoolFinalizer,
		WatchFilterValue: r.WatchFilterValue,
		OwnedConditions:  []string{v1alpha1.ReadyCondition},
		// The pool's status is this controller's alone.
		SoleStatusWriter: true,
	})
	if err != nil {
		return err
	}
	log := ctrl.LoggerFrom(ctx).WithValues("controller", strings.ToLower(r.Kind))
	return ctrl.NewControllerManagedBy(mgr).
		Named(strings.ToLower(r.Kind)).
		For(r.NewObject(), builder.WithPredicates(watch.Filter(mgr.GetScheme(), log, r.WatchFilterValue),
			// Not its own status writes: they would bring the pool back at
			// once and undo the batching of address events.
			ignoreStatusUpdates())).
		WithOptions(options).
		Watches(&v1alpha1.MonolithIPAllocation{}, r.recordToPool()).
		Watches(&ipamv1.IPAddressClaim{}, r.releasedClaimToPool()).
		Complete(reconcile.Func(func(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
			if err := r.Client.Get(ctx, req.NamespacedName, r.NewObject()); apierrors.IsNotFound(err) {
				return ctrl.Result{}, r.forgetGonePool(ctx, req)
			}
			return scaffold.Reconcile(ctx, req)
		}))
}

// forgetGonePool drops the allocation records of a pool that is gone
// without its finalizer having run: `clusterctl move` removes the
// finalizers of what it deletes from the source cluster at once, and the
// claims it deletes there are paused. The addresses live on in the target
// cluster; here nothing may hold them any more.
func (r *Reconciler[T]) forgetGonePool(ctx context.Context, req ctrl.Request) error {
	reader := r.APIReader
	if reader == nil {
		reader = r.Client
	}
	if err := reader.Get(ctx, req.NamespacedName, r.NewObject()); !apierrors.IsNotFound(err) {
		// Still there (the cache is behind), or unknown: keep everything.
		return client.IgnoreNotFound(err)
	}
	key := index.PoolKey{Kind: r.Kind, Namespace: req.Namespace, Name: req.Name}
	recs, err := r.poolRecords(ctx, key)
	if err != nil {
		return err
	}
	for i := range recs {
		ctrl.LoggerFrom(ctx).V(2).Info("Deleting the allocation record of a pool that is gone", "record", recs[i].Name)
		if err := r.Client.Delete(ctx, &recs[i], client.Preconditions{UID: &recs[i].UID}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("failed to delete allocation record %s: %w", recs[i].Name, err)
		}
	}
	r.Ledger.Remove(key)
	metrics.DeletePool(key)
	return nil
}

// ignoreStatusUpdates passes every event but updates that changed nothing
// outside status.
func ignoreStatusUpdates() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, n := e.ObjectOld, e.ObjectNew
			return o.GetGeneration() != n.GetGeneration() ||
				!o.GetDeletionTimestamp().Equal(n.GetDeletionTimestamp()) ||
				!equality.Semantic.DeepEqual(o.GetLabels(), n.GetLabels()) ||
				!equality.Semantic.DeepEqual(o.GetAnnotations(), n.GetAnnotations()) ||
				!equality.Semantic.DeepEqual(o.GetFinalizers(), n.GetFinalizers()) ||
				!equality.Semantic.DeepEqual(o.GetOwnerReferences(), n.GetOwnerReferences())
		},
	}
}

// recordToPool brings a pool back when one of its allocation records
// changes, whichever manager or namespace it is for, so that its counts stay
// current and a held deletion proceeds.
func (r *Reconciler[T]) recordToPool() handler.EventHandler {
	enqueue := func(o client.Object, q workqueue.TypedRateLimitingInterface[ctrl.Request]) {
		rec, ok := o.(*v1alpha1.MonolithIPAllocation)
		if !ok {
			return
		}
		if key := index.KeyOfAllocation(rec); key.Kind == r.Kind {
			// Delayed so that a burst of allocations costs one status
			// write per pool per statusBatchDelay, not one per address:
			// the queue keeps a pool waiting only once.
			q.AddAfter(ctrl.Request{NamespacedName: types.NamespacedName{Namespace: key.Namespace, Name: key.Name}}, statusBatchDelay)
		}
	}
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[ctrl.Request]) {
			enqueue(e.Object, q)
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[ctrl.Request]) {
			enqueue(e.ObjectNew, q)
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[ctrl.Request]) {
			enqueue(e.Object, q)
		},
	}
}

// releasedClaimToPool brings a pool back when one of its claims is finally
// gone: the claim's address was released just before, after the IPAddress
// delete event may already have been handled.
func (r *Reconciler[T]) releasedClaimToPool() handler.EventHandler {
	return handler.Funcs{
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[ctrl.Request]) {
			c, ok := e.Object.(*ipamv1.IPAddressClaim)
			if !ok {
				return
			}
			if key, ours := index.KeyOfRef(c.Spec.PoolRef, c.Namespace); ours && key.Kind == r.Kind {
				q.Add(ctrl.Request{NamespacedName: types.NamespacedName{Namespace: key.Namespace, Name: key.Name}})
			}
		},
	}
}

// ReconcileNormal reports the pool's counts and validity, and deletes its
// released records whose grace period is over.
func (r *Reconciler[T]) ReconcileNormal(ctx context.Context, s *scope[T]) (ctrl.Result, error) {
	pool := s.Object
	state, err := r.Ledger.For(ctx, pool)
	if err != nil {
		if errors.Is(err, ledger.ErrInvalidPool) {
			// Only reachable with the webhook off: say why, hand out nothing.
			s.Results.invalidSpec = err
			metrics.DeletePool(index.KeyOf(pool))
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	res, err := r.collectExpired(ctx, index.KeyOf(pool))
	if sweepErr := r.sweepOrphans(ctx, index.KeyOf(pool)); sweepErr != nil {
		err = errors.Join(err, sweepErr)
	}
	c := state.Allocator().Counts().Int64()
	s.Results.counts = &c
	metrics.SetPool(index.KeyOf(pool), c)
	return res, err
}

// poolRecords lists the pool's allocation records from the cache; records
// are cluster-scoped, so every namespace's are there whatever the manager
// watches.
func (r *Reconciler[T]) poolRecords(ctx context.Context, key index.PoolKey) ([]v1alpha1.MonolithIPAllocation, error) {
	list := &v1alpha1.MonolithIPAllocationList{}
	if err := r.Client.List(ctx, list, client.MatchingFields{index.AllocationPoolField: key.String()}); err != nil {
		return nil, fmt.Errorf("failed to list the allocation records of the pool: %w", err)
	}
	return list.Items, nil
}

// sweepOrphans deletes, at most once per sweepInterval per pool (and on the
// pool's first reconcile after a start), the pool's live records whose
// claim is gone without a release: finalizers removed by hand, a claim
// moved away from a GlobalMonolithIPPool by clusterctl move. Candidates come
// from the cache; each is confirmed past the cache (the claim and its
// IPAddress both gone) and deleted only as read.
func (r *Reconciler[T]) sweepOrphans(ctx context.Context, key index.PoolKey) error {
	if last, ok := r.lastSwept.Load(key); ok && time.Since(last.(time.Time)) < sweepInterval {
		return nil
	}
	recs, err := r.poolRecords(ctx, key)
	if err != nil {
		return err
	}
	reader := r.reader()
	for i := range recs {
		rec := &recs[i]
		if rec.IsReleased() || !r.claimLooksGone(ctx, rec) {
			continue
		}
		orphan, err := records.Orphaned(ctx, reader, rec)
		if err != nil {
			return err
		}
		if !orphan {
			continue
		}
		// An IPAddress of the record's address still there means the
		// address is in use: the record stays until it goes.
		address := &ipamv1.IPAddress{}
		err = reader.Get(ctx, types.NamespacedName{Namespace: rec.Spec.ClaimRef.Namespace, Name: rec.Spec.ClaimRef.Name}, address)
		if err == nil && address.Spec.Address == rec.Spec.Address {
			continue
		}
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("failed to read the IPAddress of allocation record %s: %w", rec.Name, err)
		}
		ctrl.LoggerFrom(ctx).Info("Deleting an allocation record whose claim is gone", "record", rec.Name, "address", rec.Spec.Address,
			"IPAddressClaim", klog.KRef(rec.Spec.ClaimRef.Namespace, rec.Spec.ClaimRef.Name))
		if err := r.Client.Delete(ctx, rec, client.Preconditions{UID: &rec.UID, ResourceVersion: &rec.ResourceVersion}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("failed to delete orphan allocation record %s: %w", rec.Name, err)
		}
	}
	r.lastSwept.Store(key, time.Now())
	return nil
}

// claimLooksGone tells from the cache whether a record's claim may be gone:
// not found, or found with another uid. A claim of a namespace the cache
// does not serve (a sharded manager) is left to the manager that serves it.
func (r *Reconciler[T]) claimLooksGone(ctx context.Context, rec *v1alpha1.MonolithIPAllocation) bool {
	claim := &ipamv1.IPAddressClaim{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: rec.Spec.ClaimRef.Namespace, Name: rec.Spec.ClaimRef.Name}, claim)
	if apierrors.IsNotFound(err) {
		return true
	}
	return err == nil && rec.Spec.ClaimRef.UID != "" && string(claim.UID) != rec.Spec.ClaimRef.UID
}

func (r *Reconciler[T]) reader() client.Reader {
	if r.APIReader != nil {
		return r.APIReader
	}
	return r.Client
}

// liveRecords lists the pool's allocation records past the cache, a page
// at a time: the apiserver serves no field selector on them, so every
// record is read once.
func (r *Reconciler[T]) liveRecords(ctx context.Context, key index.PoolKey) ([]v1alpha1.MonolithIPAllocation, error) {
	var out []v1alpha1.MonolithIPAllocation
	opts := []client.ListOption{client.Limit(recordPage)}
	for {
		list := &v1alpha1.MonolithIPAllocationList{}
		if err := r.reader().List(ctx, list, opts...); err != nil {
			return nil, fmt.Errorf("failed to list allocation records past the cache: %w", err)
		}
		for i := range list.Items {
			if index.KeyOfAllocation(&list.Items[i]) == key {
				out = append(out, list.Items[i])
			}
		}
		if list.Continue == "" {
			return out, nil
		}
		opts = []client.ListOption{client.Limit(recordPage), client.Continue(list.Continue)}
	}
}

// collectExpired deletes the pool's released records whose grace period is
// over, and asks to come back when the next one ends.
func (r *Reconciler[T]) collectExpired(ctx context.Context, key index.PoolKey) (ctrl.Result, error) {
	recs, err := r.poolRecords(ctx, key)
	if err != nil {
		return ctrl.Result{}, err
	}
	now := time.Now()
	var next time.Duration
	for i := range recs {
		rec := &recs[i]
		at, released := records.ReusableAfter(rec)
		if !released {
			continue
		}
		if wait := at.Sub(now); wait > 0 {
			if next == 0 || wait < next {
				next = wait
			}
			continue
		}
		// Deleted only as read: a record re-created since is never lost.
		if err := r.Client.Delete(ctx, rec, client.Preconditions{UID: &rec.UID, ResourceVersion: &rec.ResourceVersion}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return ctrl.Result{}, fmt.Errorf("failed to delete expired allocation record %s: %w", rec.Name, err)
		}
	}
	if next > 0 {
		return ctrl.Result{RequeueAfter: next + time.Second}, nil
	}
	return ctrl.Result{}, nil
}

// ReconcileDelete lets the pool go once no address of it is allocated, or
// at once with the skip-delete-protection annotation (clusterctl move). The
// count comes from the allocation records, which every manager sees whole.
func (r *Reconciler[T]) ReconcileDelete(ctx context.Context, s *scope[T]) (ctrl.Result, error) {
	pool := s.Object
	key := index.KeyOf(pool)
	// Counted past the cache: a record created a moment ago (a claim being
	// served while the pool is deleted) may not be in it yet, and letting
	// the pool go would drop that address's protection.
	recs, err := r.liveRecords(ctx, key)
	if err != nil {
		return ctrl.Result{}, err
	}
	if !v1alpha1.DeleteProtectionSkipped(pool) {
		n := 0
		for i := range recs {
			if !recs[i].IsReleased() {
				n++
			}
		}
		if n > 0 {
			s.Results.blockingDeletion = n
			return ctrl.Result{RequeueAfter: deletionRecheck}, nil
		}
	}
	// A deleted pool hands nothing out again: its records go with it (with
	// skip-delete-protection, the IPAddresses moved elsewhere get new ones
	// where they land).
	for i := range recs {
		if err := r.Client.Delete(ctx, &recs[i], client.Preconditions{UID: &recs[i].UID}); err != nil && !apierrors.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("failed to delete allocation record %s: %w", recs[i].Name, err)
		}
	}
	r.Ledger.Remove(key)
	metrics.DeletePool(key)
	return ctrl.Result{}, nil
}
