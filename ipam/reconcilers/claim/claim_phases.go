package claim

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util/annotations"

	"github.com/capi-monolith/capi-monolith/contracts/reconcile"
	"github.com/capi-monolith/capi-monolith/ipam/allocator"
	"github.com/capi-monolith/capi-monolith/ipam/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/ipam/index"
	"github.com/capi-monolith/capi-monolith/ipam/ledger"
)

const (
	// exhaustedRecheck is how often a claim waiting on a full pool looks
	// again, beside the release events that normally wake it.
	exhaustedRecheck = time.Minute
	// boundWriteGrace is how long a status write of ours may take to show
	// in the cache before the claim is written again.
	boundWriteGrace = 10 * time.Second
)

// ReconcileNormal makes sure the claim has an IPAddress from its pool.
func (r *Reconciler) ReconcileNormal(ctx context.Context, s *reconcile.Scope[*ipamv1.IPAddressClaim]) (ctrl.Result, error) {
	claim := s.Object
	claimKey := client.ObjectKeyFromObject(claim)
	key, ok := index.KeyOfRef(claim.Spec.PoolRef, claim.Namespace)
	if !ok {
		return ctrl.Result{}, nil // filtered out by the watch; never ours
	}
	if claim.Status.AddressRef.Name == "" {
		r.firstSeen.LoadOrStore(claimKey, time.Now())
	}
	pool, state, res, err := r.poolState(ctx, claim, key)
	if pool == nil || state == nil {
		return res, err
	}
	log := ctrl.LoggerFrom(ctx).WithValues(key.Kind, klog.KRef(key.Namespace, key.Name))
	ctx = ctrl.LoggerInto(ctx, log)

	address := &ipamv1.IPAddress{}
	err = r.Client.Get(ctx, claimKey, address)
	switch {
	case err != nil && !apierrors.IsNotFound(err):
		return ctrl.Result{}, fmt.Errorf("failed to get IPAddress %s: %w", claimKey, err)
	case err == nil && !address.DeletionTimestamp.IsZero():
		// Deleted by hand while the claim lives: let it go, then re-create
		// it with the same address, which the ledger keeps held.
		log.Info("IPAddress deleted while its claim exists; it will be re-created", "address", address.Spec.Address)
		return ctrl.Result{}, r.removeAddressFinalizer(ctx, address)
	case err == nil:
		if r.justBound(claimKey, address.Name) && claim.Status.AddressRef.Name == "" {
			// This process created the address and wrote the claim's
			// status a moment ago; the cache lags. Writing the same
			// status again would cost every allocation one more write.
			// Looked at again later, in case that write failed.
			s.Stale = true
			return ctrl.Result{RequeueAfter: boundWriteGrace}, nil
		}
		r.bound.Delete(claimKey)
		return ctrl.Result{}, r.adopt(ctx, claim, pool, key, address)
	}

	requested, err := requestedAddress(claim)
	if err != nil {
		setNotReady(claim, ipamv1.IPAddressClaimReadyAllocationFailedReason, err.Error())
		return ctrl.Result{}, nil
	}
	addr, err := state.Allocate(claimKey, requested)
	if err != nil {
		return r.allocationFailed(claim, key, state, err), nil
	}
	address = newIPAddress(claim, pool, key, addr, state)
	log.Info("Creating IPAddress", "address", addr.String())
	if err := r.Client.Create(ctx, address); err != nil {
		if apierrors.IsAlreadyExists(err) {
			// Our own earlier create, not in the cache yet: its event
			// brings the claim back.
			return ctrl.Result{}, nil
		}
		state.Cancel(claimKey, addr)
		setNotReady(claim, ipamv1.IPAddressClaimReadyAllocationFailedReason, fmt.Sprintf("Failed to create IPAddress for %s", addr))
		return ctrl.Result{}, fmt.Errorf("failed to create IPAddress %s: %w", claimKey, err)
	}
	r.observeLatency(claimKey)
	setBound(claim, address)
	r.bound.Store(claimKey, boundWrite{address: address.Name, at: time.Now()})
	return ctrl.Result{}, nil
}

// boundWrite is a claim status this process wrote: bound to address, at.
type boundWrite struct {
	address string
	at      time.Time
}

// justBound tells whether this process bound the claim to address within
// boundWriteGrace.
func (r *Reconciler) justBound(claimKey types.NamespacedName, address string) bool {
	v, ok := r.bound.Load(claimKey)
	if !ok {
		return false
	}
	w := v.(boundWrite)
	return w.address == address && time.Since(w.at) < boundWriteGrace
}

// poolState gets the claim's pool and its ledger state. A nil pool or
// state means the claim waits; the condition says why.
func (r *Reconciler) poolState(ctx context.Context, claim *ipamv1.IPAddressClaim, key index.PoolKey) (v1alpha1.Pool, *ledger.Pool, ctrl.Result, error) {
	pool, objKey := key.NewPool()
	if err := r.Client.Get(ctx, objKey, pool); err != nil {
		if apierrors.IsNotFound(err) {
			setNotReady(claim, ipamv1.IPAddressClaimReadyPoolNotReadyReason, fmt.Sprintf("%s not found", poolName(key)))
			return nil, nil, ctrl.Result{}, nil
		}
		return nil, nil, ctrl.Result{}, fmt.Errorf("failed to get %s: %w", poolName(key), err)
	}
	if annotations.HasPaused(pool) {
		ctrl.LoggerFrom(ctx).V(4).Info("Pool is paused", "pool", poolName(key))
		return nil, nil, ctrl.Result{}, nil
	}
	if !pool.GetDeletionTimestamp().IsZero() && claim.Status.AddressRef.Name == "" {
		setNotReady(claim, ipamv1.IPAddressClaimReadyPoolNotReadyReason, fmt.Sprintf("%s is being deleted", poolName(key)))
		return nil, nil, ctrl.Result{}, nil
	}
	state, err := r.Ledger.For(ctx, pool)
	if err != nil {
		if errors.Is(err, ledger.ErrInvalidPool) {
			setNotReady(claim, ipamv1.IPAddressClaimReadyPoolNotReadyReason, fmt.Sprintf("%s is not valid", poolName(key)))
			return nil, nil, ctrl.Result{}, nil
		}
		return nil, nil, ctrl.Result{}, err
	}
	return pool, state, ctrl.Result{}, nil
}

func (r *Reconciler) allocationFailed(claim *ipamv1.IPAddressClaim, key index.PoolKey, state *ledger.Pool, err error) ctrl.Result {
	switch {
	case errors.Is(err, allocator.ErrExhausted):
		setNotReady(claim, ipamv1.IPAddressClaimReadyPoolExhaustedReason, fmt.Sprintf("%s has no free address", poolName(key)))
		// Released addresses wake waiting claims through the IPAddress
		// watch; cooling-down ones only by time.
		if at, ok := state.Allocator().NextReusable(); ok {
			return ctrl.Result{RequeueAfter: time.Until(at) + time.Second}
		}
		return ctrl.Result{RequeueAfter: exhaustedRecheck}
	case errors.Is(err, allocator.ErrInGracePeriod):
		setNotReady(claim, ipamv1.IPAddressClaimReadyAllocationFailedReason, fmt.Sprintf("Requested address %s is in its reuse grace period", claim.Annotations[v1alpha1.RequestedAddressAnnotation]))
		return ctrl.Result{RequeueAfter: time.Duration(state.GracePeriodSeconds()) * time.Second}
	case errors.Is(err, allocator.ErrInUse):
		setNotReady(claim, ipamv1.IPAddressClaimReadyAllocationFailedReason, fmt.Sprintf("Requested address %s is already in use", claim.Annotations[v1alpha1.RequestedAddressAnnotation]))
	case errors.Is(err, allocator.ErrNotInPool):
		setNotReady(claim, ipamv1.IPAddressClaimReadyAllocationFailedReason, fmt.Sprintf("Requested address %s cannot be allocated from %s", claim.Annotations[v1alpha1.RequestedAddressAnnotation], poolName(key)))
	default:
		setNotReady(claim, ipamv1.IPAddressClaimReadyAllocationFailedReason, "Allocation failed")
	}
	return ctrl.Result{}
}

func requestedAddress(claim *ipamv1.IPAddressClaim) (netip.Addr, error) {
	v, ok := claim.Annotations[v1alpha1.RequestedAddressAnnotation]
	if !ok {
		return netip.Addr{}, nil
	}
	addr, err := netip.ParseAddr(v)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("annotation %s=%q is not an IP address", v1alpha1.RequestedAddressAnnotation, v)
	}
	return addr, nil
}

func newIPAddress(claim *ipamv1.IPAddressClaim, pool v1alpha1.Pool, key index.PoolKey, addr netip.Addr, state *ledger.Pool) *ipamv1.IPAddress {
	a := &ipamv1.IPAddress{
		ObjectMeta: metav1.ObjectMeta{Namespace: claim.Namespace, Name: claim.Name},
		Spec: ipamv1.IPAddressSpec{
			ClaimRef: ipamv1.IPAddressClaimReference{Name: claim.Name},
			PoolRef:  ipamv1.IPPoolReference{APIGroup: v1alpha1.GroupVersion.Group, Kind: key.Kind, Name: key.Name},
			Address:  addr.String(),
			Prefix:   ptr.To(state.Prefix()),
			Gateway:  state.Gateway(),
		},
	}
	ensureOwnership(a, claim, pool, key)
	return a
}

// ensureOwnership sets what the contract asks of an IPAddress: owned by its
// claim (controller) and its pool, protected by our finalizer, labelled with
// the claim's cluster. It reports whether anything changed.
func ensureOwnership(a *ipamv1.IPAddress, claim *ipamv1.IPAddressClaim, pool v1alpha1.Pool, key index.PoolKey) bool {
	before := a.DeepCopy()
	claimRef := metav1.OwnerReference{
		APIVersion: ipamv1.GroupVersion.String(), Kind: "IPAddressClaim", Name: claim.Name, UID: claim.UID,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}
	poolRef := metav1.OwnerReference{
		APIVersion: v1alpha1.GroupVersion.String(), Kind: key.Kind, Name: pool.GetName(), UID: pool.GetUID(),
		BlockOwnerDeletion: ptr.To(true),
	}
	a.OwnerReferences = upsertOwner(upsertOwner(a.OwnerReferences, claimRef), poolRef)
	controllerutil.AddFinalizer(a, v1alpha1.ProtectAddressFinalizer)
	if cluster := index.ClusterOfClaim(claim); cluster != "" {
		if a.Labels == nil {
			a.Labels = map[string]string{}
		}
		a.Labels[clusterv1.ClusterNameLabel] = cluster
	}
	return !equalMeta(before, a)
}

func equalMeta(a, b *ipamv1.IPAddress) bool {
	return reflect.DeepEqual(a.OwnerReferences, b.OwnerReferences) &&
		reflect.DeepEqual(a.Finalizers, b.Finalizers) &&
		reflect.DeepEqual(a.Labels, b.Labels)
}

func upsertOwner(refs []metav1.OwnerReference, ref metav1.OwnerReference) []metav1.OwnerReference {
	for i := range refs {
		if refs[i].Kind == ref.Kind && refs[i].Name == ref.Name && refs[i].APIVersion == ref.APIVersion {
			refs[i] = ref
			return refs
		}
	}
	return append(refs, ref)
}

// adopt checks an existing IPAddress belongs to the claim and pool, takes
// ownership of one left without owners (e.g. after `clusterctl move`), and
// reports the claim bound.
func (r *Reconciler) adopt(ctx context.Context, claim *ipamv1.IPAddressClaim, pool v1alpha1.Pool, key index.PoolKey, address *ipamv1.IPAddress) error {
	if address.Spec.ClaimRef.Name != claim.Name {
		setNotReady(claim, ipamv1.IPAddressClaimReadyAllocationFailedReason, fmt.Sprintf("IPAddress %s exists and belongs to claim %q", address.Name, address.Spec.ClaimRef.Name))
		return nil
	}
	if k, ok := index.KeyOfRef(address.Spec.PoolRef, address.Namespace); !ok || k != key {
		setNotReady(claim, ipamv1.IPAddressClaimReadyAllocationFailedReason, fmt.Sprintf("IPAddress %s exists and is from another pool", address.Name))
		return nil
	}
	original := address.DeepCopy()
	if ensureOwnership(address, claim, pool, key) {
		ctrl.LoggerFrom(ctx).Info("Adopting IPAddress", "address", address.Spec.Address)
		if err := r.Client.Patch(ctx, address, client.MergeFrom(original)); err != nil {
			return fmt.Errorf("failed to adopt IPAddress %s: %w", address.Name, err)
		}
	}
	r.observeLatency(client.ObjectKeyFromObject(claim))
	setBound(claim, address)
	return nil
}

func (r *Reconciler) removeAddressFinalizer(ctx context.Context, address *ipamv1.IPAddress) error {
	if !controllerutil.ContainsFinalizer(address, v1alpha1.ProtectAddressFinalizer) {
		return nil
	}
	original := address.DeepCopy()
	controllerutil.RemoveFinalizer(address, v1alpha1.ProtectAddressFinalizer)
	if err := r.Client.Patch(ctx, address, client.MergeFrom(original)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("failed to remove the finalizer of IPAddress %s: %w", address.Name, err)
	}
	return nil
}

// ReconcileDelete releases the claim's address: the IPAddress loses our
// finalizer and is deleted before the claim's finalizer goes.
func (r *Reconciler) ReconcileDelete(ctx context.Context, s *reconcile.Scope[*ipamv1.IPAddressClaim]) (ctrl.Result, error) {
	claim := s.Object
	claimKey := client.ObjectKeyFromObject(claim)
	r.firstSeen.Delete(claimKey)
	r.bound.Delete(claimKey)
	address := &ipamv1.IPAddress{}
	err := r.Client.Get(ctx, claimKey, address)
	switch {
	case apierrors.IsNotFound(err):
		r.releaseHeld(ctx, claim, claimKey)
		return ctrl.Result{}, nil
	case err != nil:
		return ctrl.Result{}, fmt.Errorf("failed to get IPAddress %s: %w", claimKey, err)
	case address.Spec.ClaimRef.Name != claim.Name:
		return ctrl.Result{}, nil // not ours to release
	}
	if err := r.removeAddressFinalizer(ctx, address); err != nil {
		return ctrl.Result{}, err
	}
	if address.DeletionTimestamp.IsZero() {
		ctrl.LoggerFrom(ctx).Info("Releasing IPAddress", "address", address.Spec.Address)
		if err := r.Client.Delete(ctx, address); err != nil && !apierrors.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("failed to delete IPAddress %s: %w", claimKey, err)
		}
	}
	// The IPAddress is gone (it has no finalizer left): release now rather
	// than on its delete event, which may reach the claims waiting for this
	// address before it reaches the ledger.
	r.releaseHeld(ctx, claim, claimKey)
	return ctrl.Result{}, nil
}

// releaseHeld frees the address the ledger keeps for a claim that is going
// and whose IPAddress is gone.
func (r *Reconciler) releaseHeld(ctx context.Context, claim *ipamv1.IPAddressClaim, claimKey types.NamespacedName) {
	key, ok := index.KeyOfRef(claim.Spec.PoolRef, claim.Namespace)
	if !ok {
		return
	}
	pool, objKey := key.NewPool()
	if err := r.Client.Get(ctx, objKey, pool); err != nil {
		return // pool gone: nothing is held any more
	}
	if state, err := r.Ledger.For(ctx, pool); err == nil {
		state.ReleaseClaim(claimKey)
	}
}
