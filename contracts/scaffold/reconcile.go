package scaffold

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/annotations"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/finalizers"
	"sigs.k8s.io/cluster-api/util/patch"
	"sigs.k8s.io/cluster-api/util/paused"
)

// Object is a Cluster API object with v1beta2 conditions.
type Object interface {
	client.Object
	conditions.Setter
}

// Scope is what one reconcile of one object knows, for a kind whose phases
// record their results in the object's status as they go.
type Scope[T Object] = ScopeWith[T, NoResults]

// NoResults is the results of phases that keep none on the scope.
type NoResults struct{}

// ScopeWith is what one reconcile of one object knows, with R, what the
// module's phases found in this reconcile: UpdateStatus derives the
// object's conditions and status from it.
type ScopeWith[T Object, R any] struct {
	// Object is the object being reconciled; changes to it are patched when
	// the reconcile ends.
	Object T
	// Cluster is the object's Cluster, nil when it has none (or no longer).
	Cluster *clusterv1.Cluster
	// Stale is set by a phase that finds the object older than a write it
	// made itself (the cache has not caught up): the scaffold then patches
	// nothing, since the patch would only repeat that write, and the
	// phase's result says when to look again.
	Stale bool
	// Results are what the phases found, starting from R's zero value.
	Results R
}

// Phases is what a module implements for one kind whose phases keep no
// results on the scope.
type Phases[T Object] = PhasesWith[T, NoResults]

// PhasesWith is what a module implements for one kind, with R the results
// its phases keep on the scope.
type PhasesWith[T Object, R any] interface {
	// ReconcileNormal drives the object towards its desired state.
	ReconcileNormal(ctx context.Context, s *ScopeWith[T, R]) (ctrl.Result, error)
	// ReconcileDelete releases what the object holds. When it returns a
	// zero result and no error, the scaffold removes the finalizer.
	ReconcileDelete(ctx context.Context, s *ScopeWith[T, R]) (ctrl.Result, error)
	// UpdateStatus sets the conditions and status fields that summarise
	// the phases. It runs before every patch, also when a phase failed.
	UpdateStatus(ctx context.Context, s *ScopeWith[T, R])
}

// ClusterGetter finds the Cluster of an object. It returns nil and no error
// when the object names no Cluster, and an error wrapping
// ErrClusterNotFound when the Cluster it names does not exist.
type ClusterGetter[T Object] func(ctx context.Context, c client.Client, obj T) (*clusterv1.Cluster, error)

// Options configure a Reconciler whose phases keep no results.
type Options[T Object] = OptionsWith[T, NoResults]

// OptionsWith configure a Reconciler.
type OptionsWith[T Object, R any] struct {
	// Client reads and patches the objects; required.
	Client client.Client
	// NewObject returns an empty object of the reconciled kind; required.
	NewObject func() T
	// Phases are the module's phases; required.
	Phases PhasesWith[T, R]

	// Finalizer is added before the first normal phase and removed when the
	// delete phase finishes. Empty means the kind has no finalizer.
	Finalizer string
	// BeforeFinalizer, if set, may set metadata and spec fields of an
	// object the finalizer is about to be added to; they are written in the
	// same patch as the finalizer. Only for what is known before anything
	// is made (nothing may be made before the finalizer is persisted).
	BeforeFinalizer func(ctx context.Context, obj T)
	// GetCluster finds the object's Cluster (ErrClusterNotFound when the
	// Cluster it names is not found; with RequireCluster the object then
	// looks again after ClusterNotFoundRequeue); nil means the kind has
	// none, and only the paused annotation pauses it.
	GetCluster ClusterGetter[T]
	// RequireCluster makes the reconciler wait, without adding the
	// finalizer, until the Cluster is found (the contract of infrastructure
	// objects, whose owner reference Cluster API sets): for an event of the
	// object while it names no Cluster, every ClusterNotFoundRequeue while
	// the Cluster it names is not found. Deletion never waits.
	RequireCluster bool
	// WaitsForOwner, if set, reports that an object waits for the owner
	// reference Cluster API sets (an infrastructure machine before the
	// Machine controller has set it): the reconciler then writes nothing,
	// neither the finalizer nor a status, as CAPD's machines do. The owner
	// reference's arrival is an event of the object itself. Deletion never
	// waits.
	WaitsForOwner func(obj T) bool
	// WatchFilterValue skips objects without this cluster.x-k8s.io/watch-filter
	// label value, whatever event enqueued them.
	WatchFilterValue string
	// OwnedConditions are the condition types the module sets; the patch
	// helper resolves conflicts on them in the module's favour. Paused is
	// always owned.
	OwnedConditions []string
	// SoleStatusWriter says that no other controller writes the kind's
	// status (conditions included): changes are then written with one
	// merge patch for the rest and one for status, instead of Cluster API's
	// patch helper, which spends an extra request on conditions; and the
	// conditions carry the generation a spec change of the same reconcile
	// makes, so that the next reconcile does not write them again.
	SoleStatusWriter bool
}

// ClusterNotFoundRequeue is how long an object that needs its Cluster waits
// before it looks again when the Cluster it names is not found.
const ClusterNotFoundRequeue = 5 * time.Second

// Reconciler is the scaffold for one kind whose phases keep no results.
type Reconciler[T Object] = ReconcilerWith[T, NoResults]

// ReconcilerWith is the scaffold for one kind.
type ReconcilerWith[T Object, R any] struct {
	opts OptionsWith[T, R]
}

// New returns the scaffold for one kind; it rejects missing dependencies.
func New[T Object, R any](opts OptionsWith[T, R]) (*ReconcilerWith[T, R], error) {
	if opts.Client == nil || opts.NewObject == nil || opts.Phases == nil {
		return nil, errors.New("scaffold: Client, NewObject and Phases are required")
	}
	opts.OwnedConditions = append([]string{clusterv1.PausedCondition}, opts.OwnedConditions...)
	return &ReconcilerWith[T, R]{opts: opts}, nil
}

// Reconcile runs the contract steps for one object, then its phases.
func (r *ReconcilerWith[T, R]) Reconcile(ctx context.Context, req ctrl.Request) (retRes ctrl.Result, retErr error) {
	obj := r.opts.NewObject()
	if err := r.opts.Client.Get(ctx, req.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("failed to get %s: %w", req.NamespacedName, err)
	}
	if v := r.opts.WatchFilterValue; v != "" && obj.GetLabels()[clusterv1.WatchLabel] != v {
		return ctrl.Result{}, nil
	}
	deleting := !obj.GetDeletionTimestamp().IsZero()
	log := ctrl.LoggerFrom(ctx)
	if !deleting && r.opts.WaitsForOwner != nil && r.opts.WaitsForOwner(obj) {
		// Written now, the status would only say that nothing is known yet,
		// and be written again once the owner is: one status patch, and
		// one watch event for every informer of the kind, per object.
		log.V(2).Info("Waiting for the owner reference")
		return ctrl.Result{}, nil
	}

	var cluster *clusterv1.Cluster
	if r.opts.GetCluster != nil {
		var err error
		cluster, err = r.opts.GetCluster(ctx, r.opts.Client, obj)
		switch {
		case errors.Is(err, ErrClusterNotFound):
			// A Cluster's creation is not an event the modules watch (only
			// its pause transitions are), so an object that arrived before
			// its Cluster reached the cache would wait for an unrelated
			// change of its own: look again later instead.
			if r.opts.RequireCluster && !deleting {
				log.V(2).Info("Waiting for the Cluster to be found", "reason", err.Error())
				return ctrl.Result{RequeueAfter: ClusterNotFoundRequeue}, nil
			}
		case err != nil:
			return ctrl.Result{}, fmt.Errorf("failed to get the Cluster: %w", err)
		}
	}
	if cluster != nil {
		log = log.WithValues("Cluster", klog.KObj(cluster))
		ctx = ctrl.LoggerInto(ctx, log)
	} else if r.opts.RequireCluster && !deleting {
		log.Info("Waiting for the owning Cluster")
		return ctrl.Result{}, nil
	}

	if (cluster != nil && ptr.Deref(cluster.Spec.Paused, false)) || annotations.HasPaused(obj) {
		// Cluster API's helper sets Paused=True (with the reason) in a patch
		// of its own; nothing else happens while paused.
		_, _, err := paused.EnsurePausedCondition(ctx, r.opts.Client, cluster, obj)
		return ctrl.Result{}, err
	}

	// Add the finalizer before doing anything that must be released, and
	// return: the patch triggers the next reconcile.
	if r.opts.Finalizer != "" && !deleting {
		if added, err := r.ensureFinalizer(ctx, obj); err != nil || added {
			return ctrl.Result{}, err
		}
	}

	write, err := r.writer(obj)
	if err != nil {
		return ctrl.Result{}, err
	}
	// Not paused: recorded with the rest of this reconcile's changes rather
	// than in a patch and a reconcile of its own, which would cost every
	// new object one more round trip.
	conditions.Set(obj, metav1.Condition{
		Type: clusterv1.PausedCondition, Status: metav1.ConditionFalse, Reason: clusterv1.NotPausedReason,
		ObservedGeneration: obj.GetGeneration(),
	})
	scope := &ScopeWith[T, R]{Object: obj, Cluster: cluster}
	defer func() {
		if scope.Stale {
			return
		}
		r.opts.Phases.UpdateStatus(ctx, scope)
		err := write(ctx)
		// The last finalizer gone, the object may be gone before its
		// status is patched; nothing is left to record then.
		if err != nil && !(deleting && apierrors.IsNotFound(err)) {
			retErr = errors.Join(retErr, fmt.Errorf("failed to patch: %w", err))
		}
	}()

	if deleting {
		res, err := r.opts.Phases.ReconcileDelete(ctx, scope)
		if err == nil && res.IsZero() && r.opts.Finalizer != "" {
			controllerutil.RemoveFinalizer(obj, r.opts.Finalizer)
		}
		return res, err
	}
	return r.opts.Phases.ReconcileNormal(ctx, scope)
}

// ensureFinalizer adds the finalizer, with what BeforeFinalizer sets, in
// one patch of metadata and spec; it reports whether it added it.
func (r *ReconcilerWith[T, R]) ensureFinalizer(ctx context.Context, obj T) (bool, error) {
	if r.opts.BeforeFinalizer == nil {
		return finalizers.EnsureFinalizer(ctx, r.opts.Client, obj, r.opts.Finalizer)
	}
	if controllerutil.ContainsFinalizer(obj, r.opts.Finalizer) {
		return false, nil
	}
	before := obj.DeepCopyObject().(client.Object)
	r.opts.BeforeFinalizer(ctx, obj)
	controllerutil.AddFinalizer(obj, r.opts.Finalizer)
	if err := r.opts.Client.Patch(ctx, obj, client.MergeFrom(before)); err != nil {
		return false, fmt.Errorf("failed to add finalizer %s: %w", r.opts.Finalizer, err)
	}
	return true, nil
}

// writer returns what writes the object's changes at the end of a reconcile.
func (r *ReconcilerWith[T, R]) writer(obj T) (func(context.Context) error, error) {
	if r.opts.SoleStatusWriter {
		before := obj.DeepCopyObject().(T)
		return func(ctx context.Context) error {
			return patchAsSoleWriter(ctx, r.opts.Client, before, obj)
		}, nil
	}
	patchHelper, err := patch.NewHelper(obj, r.opts.Client)
	if err != nil {
		return nil, fmt.Errorf("failed to create the patch helper: %w", err)
	}
	return func(ctx context.Context) error {
		return patchHelper.Patch(ctx, obj, patch.WithOwnedConditions{Conditions: r.opts.OwnedConditions})
	}, nil
}
