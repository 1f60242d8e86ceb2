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

	"github.com/capi-monolith/capi-monolith/ipam/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/ipam/internal/allocator"
	"github.com/capi-monolith/capi-monolith/ipam/internal/index"
	"github.com/capi-monolith/capi-monolith/ipam/internal/ledger"
	"github.com/capi-monolith/capi-monolith/ipam/internal/records"
)

const (
	// exhaustedRecheck is how often a claim waiting on a full pool looks
	// again, beside the release events that normally wake it.
	exhaustedRecheck = time.Minute
	// boundWriteGrace is how long a status write of ours may take to show
	// in the cache before the claim is written again.
	boundWriteGrace = 10 * time.Second
	// releaseRecheck is how often a release waiting for other finalizers
	// looks again, beside the update events that normally bring it back.
	// A zero result would let the scaffold drop our finalizer unreleased.
	releaseRecheck = 30 * time.Second
)

// ReconcileNormal makes sure the claim has an IPAddress from its pool.
func (r *Reconciler) ReconcileNormal(ctx context.Context, s *scope) (ctrl.Result, error) {
	claim, res := s.Object, &s.Results
	claimKey := client.ObjectKeyFromObject(claim)
	cid := records.Claim{NamespacedName: claimKey, UID: claim.UID}
	key, ok := index.KeyOfRef(claim.Spec.PoolRef, claim.Namespace)
	if !ok {
		return ctrl.Result{}, nil // filtered out by the watch; never ours
	}
	if claim.Status.AddressRef.Name == "" {
		r.firstSeen.LoadOrStore(claimKey, time.Now())
	}
	pool, state, result, err := r.poolState(ctx, s, key)
	if pool == nil || state == nil {
		return result, err
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
		// it with the same address, which the claim's record keeps.
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
		return r.adopt(ctx, s, cid, pool, key, state, address)
	}

	requested, err := requestedAddress(claim)
	if err != nil {
		res.fail(ipamv1.IPAddressClaimReadyAllocationFailedReason, err.Error())
		return ctrl.Result{}, nil
	}
	rec, result, err := r.take(ctx, s, cid, pool, key, state, requested)
	if rec == nil {
		return result, err
	}
	address = newIPAddress(claim, pool, key, rec)
	log.Info("Creating IPAddress", "address", rec.Spec.Address)
	if err := r.Client.Create(ctx, address); err != nil {
		if apierrors.IsAlreadyExists(err) {
			// Our own earlier create, not in the cache yet (or another
			// manager's): its event brings the claim back.
			return ctrl.Result{}, nil
		}
		// The address stays the claim's: its record holds it until the
		// claim goes. The next reconcile creates the IPAddress again, or
		// finds that this create did commit.
		res.fail(ipamv1.IPAddressClaimReadyAllocationFailedReason, fmt.Sprintf("Failed to create IPAddress for %s", rec.Spec.Address))
		return ctrl.Result{}, fmt.Errorf("failed to create IPAddress %s: %w", claimKey, err)
	}
	r.observeLatency(claimKey)
	res.bind(address)
	r.bound.Store(claimKey, boundWrite{address: address.Name, at: time.Now()})
	return ctrl.Result{}, nil
}

// errNotInPool is why an existing IPAddress without a record is not adopted.
var errNotInPool = errors.New("not in the pool")

// maxTakeAttempts bounds how many addresses one reconcile tries when other
// managers (or overlapping pools) took the ones this ledger thought free.
const maxTakeAttempts = 16

// take allocates an address for the claim and creates its allocation
// record, which is what makes the address the claim's. A nil record means
// the claim waits: the condition or the error says why.
func (r *Reconciler) take(ctx context.Context, s *scope, cid records.Claim, pool v1alpha1.Pool, key index.PoolKey, state *ledger.Pool, requested netip.Addr) (*v1alpha1.MonolithIPAllocation, ctrl.Result, error) {
	claim, res := s.Object, &s.Results
	log := ctrl.LoggerFrom(ctx)
	for range maxTakeAttempts {
		addr, err := state.Allocate(cid, requested)
		if err != nil {
			return nil, allocationFailed(s, key, state, err), nil
		}
		name := records.Name(key, addr, records.AllowsOverlap(pool))
		// A record of this claim already there (an IPAddress to re-create,
		// a restart between record and IPAddress): use it as it is.
		rec := &v1alpha1.MonolithIPAllocation{}
		if err := r.Client.Get(ctx, client.ObjectKey{Name: name}, rec); err == nil {
			if owns(rec, cid) {
				return rec, ctrl.Result{}, nil
			}
			if !rec.IsReleased() && !requested.IsValid() {
				// The cache already knows the address is another claim's:
				// no write needed to learn it. (A stale cache only makes
				// this reconcile skip an address that was just freed.)
				state.Taken(cid, addr, rec)
				continue
			}
		}
		rec = newRecord(name, claim, key, addr, state.Prefix(), state.Gateway())
		createErr := r.Client.Create(ctx, rec)
		if createErr == nil {
			return rec, ctrl.Result{}, nil
		}
		// Whether the create committed is only known by reading it back,
		// past the cache: a timeout may hide a success, and undoing a
		// committed allocation would hand the address out twice.
		existing := &v1alpha1.MonolithIPAllocation{}
		if err := r.APIReader.Get(ctx, client.ObjectKey{Name: name}, existing); err != nil {
			return nil, ctrl.Result{}, fmt.Errorf("failed to create allocation record %s for %s (and to read it back: %w): %w", name, addr, err, createErr)
		}
		if owns(existing, cid) {
			return existing, ctrl.Result{}, nil
		}
		if at, released := records.ReusableAfter(existing); released && !time.Now().Before(at) {
			// A released record whose grace period is over: the address is
			// free. Deleted only as read, so a newer record is never lost.
			log.V(4).Info("Deleting expired allocation record", "record", name)
			if err := r.Client.Delete(ctx, existing, client.Preconditions{UID: &existing.UID, ResourceVersion: &existing.ResourceVersion}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				return nil, ctrl.Result{}, fmt.Errorf("failed to delete expired allocation record %s: %w", name, err)
			}
			state.Taken(cid, addr, existing)
			continue
		}
		log.V(2).Info("Address taken by another claim", "address", addr.String(), "holder", existing.Spec.ClaimRef.Namespace+"/"+existing.Spec.ClaimRef.Name)
		state.Taken(cid, addr, existing)
		if requested.IsValid() {
			if _, released := records.ReusableAfter(existing); released {
				res.fail(ipamv1.IPAddressClaimReadyAllocationFailedReason, fmt.Sprintf("Requested address %s is in its reuse grace period", addr))
				return nil, ctrl.Result{RequeueAfter: state.GracePeriod()}, nil
			}
			res.fail(ipamv1.IPAddressClaimReadyAllocationFailedReason, fmt.Sprintf("Requested address %s is already in use", addr))
			return nil, ctrl.Result{}, nil
		}
	}
	return nil, ctrl.Result{}, fmt.Errorf("no address of %s could be taken after %d attempts: other managers took them first", poolName(key), maxTakeAttempts)
}

// owns tells whether rec allocates its address to the claim cid now.
func owns(rec *v1alpha1.MonolithIPAllocation, cid records.Claim) bool {
	return !rec.IsReleased() && records.ClaimOf(rec) == cid
}

func newRecord(name string, claim *ipamv1.IPAddressClaim, key index.PoolKey, addr netip.Addr, prefix int32, gateway string) *v1alpha1.MonolithIPAllocation {
	return &v1alpha1.MonolithIPAllocation{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.MonolithIPAllocationSpec{
			Address: addr.String(), Prefix: prefix, Gateway: gateway,
			PoolRef:  v1alpha1.AllocationPoolReference{Kind: key.Kind, Namespace: key.Namespace, Name: key.Name},
			ClaimRef: v1alpha1.AllocationClaimReference{Namespace: claim.Namespace, Name: claim.Name, UID: string(claim.UID)},
		},
	}
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
func (r *Reconciler) poolState(ctx context.Context, s *scope, key index.PoolKey) (v1alpha1.Pool, *ledger.Pool, ctrl.Result, error) {
	claim, res := s.Object, &s.Results
	pool, objKey := key.NewPool()
	if err := r.Client.Get(ctx, objKey, pool); err != nil {
		if apierrors.IsNotFound(err) {
			res.fail(ipamv1.IPAddressClaimReadyPoolNotReadyReason, fmt.Sprintf("%s not found", poolName(key)))
			return nil, nil, ctrl.Result{}, nil
		}
		return nil, nil, ctrl.Result{}, fmt.Errorf("failed to get %s: %w", poolName(key), err)
	}
	if annotations.HasPaused(pool) {
		ctrl.LoggerFrom(ctx).V(4).Info("Pool is paused", "pool", poolName(key))
		return nil, nil, ctrl.Result{}, nil
	}
	if !pool.GetDeletionTimestamp().IsZero() && claim.Status.AddressRef.Name == "" {
		res.fail(ipamv1.IPAddressClaimReadyPoolNotReadyReason, fmt.Sprintf("%s is being deleted", poolName(key)))
		return nil, nil, ctrl.Result{}, nil
	}
	state, err := r.Ledger.For(ctx, pool)
	if err != nil {
		if errors.Is(err, ledger.ErrInvalidPool) {
			res.fail(ipamv1.IPAddressClaimReadyPoolNotReadyReason, fmt.Sprintf("%s is not valid: %v", poolName(key), err))
			return nil, nil, ctrl.Result{}, nil
		}
		return nil, nil, ctrl.Result{}, err
	}
	return pool, state, ctrl.Result{}, nil
}

func allocationFailed(s *scope, key index.PoolKey, state *ledger.Pool, err error) ctrl.Result {
	claim, res := s.Object, &s.Results
	switch {
	case errors.Is(err, allocator.ErrExhausted):
		res.fail(ipamv1.IPAddressClaimReadyPoolExhaustedReason, fmt.Sprintf("%s has no free address", poolName(key)))
		// Released addresses wake waiting claims through the IPAddress
		// watch; cooling-down ones only by time.
		if at, ok := state.Allocator().NextReusable(); ok {
			return ctrl.Result{RequeueAfter: time.Until(at) + time.Second}
		}
		return ctrl.Result{RequeueAfter: exhaustedRecheck}
	case errors.Is(err, allocator.ErrInGracePeriod):
		res.fail(ipamv1.IPAddressClaimReadyAllocationFailedReason, fmt.Sprintf("Requested address %s is in its reuse grace period", claim.Annotations[v1alpha1.RequestedAddressAnnotation]))
		return ctrl.Result{RequeueAfter: state.GracePeriod()}
	case errors.Is(err, allocator.ErrInUse):
		res.fail(ipamv1.IPAddressClaimReadyAllocationFailedReason, fmt.Sprintf("Requested address %s is already in use", claim.Annotations[v1alpha1.RequestedAddressAnnotation]))
	case errors.Is(err, allocator.ErrNotInPool):
		res.fail(ipamv1.IPAddressClaimReadyAllocationFailedReason, fmt.Sprintf("Requested address %s cannot be allocated from %s", claim.Annotations[v1alpha1.RequestedAddressAnnotation], poolName(key)))
	default:
		res.fail(ipamv1.IPAddressClaimReadyAllocationFailedReason, "Allocation failed")
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

// newIPAddress is the claim's IPAddress with the values its record keeps,
// so that a re-created IPAddress is identical to the first one whatever the
// pool's spec says now.
func newIPAddress(claim *ipamv1.IPAddressClaim, pool v1alpha1.Pool, key index.PoolKey, rec *v1alpha1.MonolithIPAllocation) *ipamv1.IPAddress {
	a := &ipamv1.IPAddress{
		ObjectMeta: metav1.ObjectMeta{Namespace: claim.Namespace, Name: claim.Name},
		Spec: ipamv1.IPAddressSpec{
			ClaimRef: ipamv1.IPAddressClaimReference{Name: claim.Name},
			PoolRef:  ipamv1.IPPoolReference{APIGroup: v1alpha1.GroupVersion.Group, Kind: key.Kind, Name: key.Name},
			Address:  rec.Spec.Address,
			Prefix:   ptr.To(rec.Spec.Prefix),
			Gateway:  rec.Spec.Gateway,
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

// adopt checks an existing IPAddress belongs to the claim and pool, makes
// sure its address is the claim's by record (an IPAddress made before
// records existed, or moved by `clusterctl move`, gets one; an address
// recorded for another claim is refused), drops records another manager
// made for the claim in a race it lost, takes ownership of an IPAddress
// left without owners, and reports the claim bound.
func (r *Reconciler) adopt(ctx context.Context, s *scope, cid records.Claim, pool v1alpha1.Pool, key index.PoolKey, state *ledger.Pool, address *ipamv1.IPAddress) (ctrl.Result, error) {
	claim, res := s.Object, &s.Results
	if address.Spec.ClaimRef.Name != claim.Name {
		res.fail(ipamv1.IPAddressClaimReadyAllocationFailedReason, fmt.Sprintf("IPAddress %s exists and belongs to claim %q", address.Name, address.Spec.ClaimRef.Name))
		return ctrl.Result{}, nil
	}
	if k, ok := index.KeyOfRef(address.Spec.PoolRef, address.Namespace); !ok || k != key {
		res.fail(ipamv1.IPAddressClaimReadyAllocationFailedReason, fmt.Sprintf("IPAddress %s exists and is from another pool", address.Name))
		return ctrl.Result{}, nil
	}
	addr, err := netip.ParseAddr(address.Spec.Address)
	if err != nil {
		res.fail(ipamv1.IPAddressClaimReadyAllocationFailedReason, fmt.Sprintf("IPAddress %s has no valid address: %q", address.Name, address.Spec.Address))
		return ctrl.Result{}, nil
	}
	holder, result, err := r.recordOf(ctx, claim, cid, pool, key, state, address, addr)
	if errors.Is(err, errNotInPool) {
		res.fail(ipamv1.IPAddressClaimReadyAllocationFailedReason, fmt.Sprintf("IPAddress %s exists with address %s, which %s cannot hand out", address.Name, addr, poolName(key)))
		return ctrl.Result{}, nil
	}
	if holder != "" {
		res.fail(ipamv1.IPAddressClaimReadyAllocationFailedReason, fmt.Sprintf("Address %s of IPAddress %s is allocated to claim %s", addr, address.Name, holder))
		return result, err
	}
	if err != nil || !result.IsZero() {
		return result, err
	}
	if err := r.dropOtherRecords(ctx, claim, cid, state, addr); err != nil {
		return ctrl.Result{}, err
	}
	original := address.DeepCopy()
	if ensureOwnership(address, claim, pool, key) {
		ctrl.LoggerFrom(ctx).Info("Adopting IPAddress", "address", address.Spec.Address)
		if err := r.Client.Patch(ctx, address, client.MergeFrom(original)); err != nil {
			return ctrl.Result{}, fmt.Errorf("failed to adopt IPAddress %s: %w", address.Name, err)
		}
	}
	r.observeLatency(client.ObjectKeyFromObject(claim))
	res.bind(address)
	return ctrl.Result{}, nil
}

// recordOf makes sure the IPAddress's address is recorded for the claim.
// holder is set when the address is recorded for another claim.
func (r *Reconciler) recordOf(ctx context.Context, claim *ipamv1.IPAddressClaim, cid records.Claim, pool v1alpha1.Pool, key index.PoolKey, state *ledger.Pool, address *ipamv1.IPAddress, addr netip.Addr) (holder string, res ctrl.Result, err error) {
	name := records.Name(key, addr, records.AllowsOverlap(pool))
	rec := &v1alpha1.MonolithIPAllocation{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: name}, rec); err == nil && owns(rec, cid) {
		return "", ctrl.Result{}, nil
	}
	// Without a record of its own the IPAddress's address becomes the
	// claim's only if the pool could have handed it out: an IPAddress made
	// in advance under the claim's name must not smuggle in any address.
	// (A record of the claim only past the cache, from before the pool
	// shrank, still makes it the claim's.)
	if alloc := state.Allocator(); alloc == nil || !alloc.Pool().Contains(addr) {
		live := &v1alpha1.MonolithIPAllocation{}
		err := r.APIReader.Get(ctx, client.ObjectKey{Name: name}, live)
		switch {
		case err == nil && owns(live, cid):
			state.Observe(live)
			return "", ctrl.Result{}, nil
		case err != nil && !apierrors.IsNotFound(err):
			return "", ctrl.Result{}, fmt.Errorf("failed to read allocation record %s: %w", name, err)
		}
		return "", ctrl.Result{}, fmt.Errorf("address %s of IPAddress %s cannot be allocated from %s: %w", addr, address.Name, poolName(key), errNotInPool)
	}
	prefix := state.Prefix()
	if address.Spec.Prefix != nil {
		prefix = *address.Spec.Prefix
	}
	rec = newRecord(name, claim, key, addr, prefix, address.Spec.Gateway)
	createErr := r.Client.Create(ctx, rec)
	if createErr == nil {
		ctrl.LoggerFrom(ctx).Info("Recorded the address of an existing IPAddress", "address", addr.String(), "record", name)
		state.Observe(rec)
		return "", ctrl.Result{}, nil
	}
	existing := &v1alpha1.MonolithIPAllocation{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Name: name}, existing); err != nil {
		return "", ctrl.Result{}, fmt.Errorf("failed to record address %s (and to read the record back: %w): %w", addr, err, createErr)
	}
	if owns(existing, cid) {
		state.Observe(existing)
		return "", ctrl.Result{}, nil
	}
	if at, released := records.ReusableAfter(existing); released && !time.Now().Before(at) {
		if err := r.Client.Delete(ctx, existing, client.Preconditions{UID: &existing.UID, ResourceVersion: &existing.ResourceVersion}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return "", ctrl.Result{}, fmt.Errorf("failed to delete expired allocation record %s: %w", name, err)
		}
		return "", ctrl.Result{RequeueAfter: time.Second}, nil
	}
	if c := records.ClaimOf(existing); c.NamespacedName == cid.NamespacedName && c.UID != cid.UID && !existing.IsReleased() {
		// The record of an earlier claim of this name (a cluster moved
		// away and back): the IPAddress is this claim's now. The old
		// record goes once its claim is confirmed gone.
		orphan, err := records.Orphaned(ctx, r.APIReader, existing)
		if err != nil {
			return "", ctrl.Result{}, err
		}
		if orphan {
			ctrl.LoggerFrom(ctx).Info("Deleting the allocation record of an earlier claim of the same name", "record", name, "address", addr.String())
			if err := r.Client.Delete(ctx, existing, client.Preconditions{UID: &existing.UID, ResourceVersion: &existing.ResourceVersion}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				return "", ctrl.Result{}, fmt.Errorf("failed to delete allocation record %s of an earlier claim: %w", name, err)
			}
			return "", ctrl.Result{RequeueAfter: time.Second}, nil
		}
	}
	return existing.Spec.ClaimRef.Namespace + "/" + existing.Spec.ClaimRef.Name, ctrl.Result{RequeueAfter: exhaustedRecheck}, nil
}

// dropOtherRecords deletes the claim's records of addresses other than
// its IPAddress's: left by a manager that lost the race to create the
// IPAddress. The IPAddress is read past the cache first, so a stale cache
// never drops the record of the address the claim really has.
func (r *Reconciler) dropOtherRecords(ctx context.Context, claim *ipamv1.IPAddressClaim, cid records.Claim, state *ledger.Pool, addr netip.Addr) error {
	list := &v1alpha1.MonolithIPAllocationList{}
	if err := r.Client.List(ctx, list, client.MatchingFields{index.AllocationClaimField: index.ClaimKey(claim.Namespace, claim.Name)}); err != nil {
		return fmt.Errorf("failed to list the allocation records of the claim: %w", err)
	}
	var extra []*v1alpha1.MonolithIPAllocation
	for i := range list.Items {
		rec := &list.Items[i]
		if owns(rec, cid) && rec.Spec.Address != addr.String() {
			extra = append(extra, rec)
		}
	}
	if len(extra) == 0 {
		return nil
	}
	live := &ipamv1.IPAddress{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(claim), live); err != nil || live.Spec.Address != addr.String() {
		return err // the cache lags; the next reconcile sees the truth
	}
	for _, rec := range extra {
		ctrl.LoggerFrom(ctx).Info("Deleting an allocation record the claim does not use", "address", rec.Spec.Address, "record", rec.Name)
		if err := r.Client.Delete(ctx, rec, client.Preconditions{UID: &rec.UID}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("failed to delete allocation record %s: %w", rec.Name, err)
		}
		state.Forget(rec)
	}
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

// ReconcileDelete releases the claim's address once nothing else holds the
// claim: other finalizers (the infra module's, a node's) mean the address
// is still in use. The IPAddress goes first, then the record; with a grace
// period the record stays, marked released, until the period is over.
func (r *Reconciler) ReconcileDelete(ctx context.Context, s *scope) (ctrl.Result, error) {
	claim := s.Object
	claimKey := client.ObjectKeyFromObject(claim)
	cid := records.Claim{NamespacedName: claimKey, UID: claim.UID}
	r.firstSeen.Delete(claimKey)
	r.bound.Delete(claimKey)
	if others := otherFinalizers(claim); len(others) > 0 {
		// The claim's update when they go brings it back.
		ctrl.LoggerFrom(ctx).V(2).Info("Release waits for the claim's other finalizers", "finalizers", others)
		return ctrl.Result{RequeueAfter: releaseRecheck}, nil
	}
	address := &ipamv1.IPAddress{}
	err := r.Client.Get(ctx, claimKey, address)
	switch {
	case apierrors.IsNotFound(err):
		address = nil
	case err != nil:
		return ctrl.Result{}, fmt.Errorf("failed to get IPAddress %s: %w", claimKey, err)
	case address.Spec.ClaimRef.Name != claim.Name:
		address = nil // not ours to release
	}
	if address != nil {
		if err := r.removeAddressFinalizer(ctx, address); err != nil {
			return ctrl.Result{}, err
		}
		if address.DeletionTimestamp.IsZero() {
			ctrl.LoggerFrom(ctx).Info("Releasing IPAddress", "address", address.Spec.Address)
			if err := r.Client.Delete(ctx, address); err != nil && !apierrors.IsNotFound(err) {
				return ctrl.Result{}, fmt.Errorf("failed to delete IPAddress %s: %w", claimKey, err)
			}
		}
		if others := otherFinalizers(address); len(others) > 0 {
			// Someone still holds the IPAddress: the address is in use
			// until it is gone; its events bring the claim back.
			return ctrl.Result{RequeueAfter: releaseRecheck}, nil
		}
	}
	return ctrl.Result{}, r.releaseRecords(ctx, claim, cid, address)
}

// otherFinalizers lists the object's finalizers that are not the ipam
// module's nor the garbage collector's: foregroundDeletion waits for the
// claim's IPAddress to go, so waiting for it in turn would never end.
func otherFinalizers(o client.Object) []string {
	var out []string
	for _, f := range o.GetFinalizers() {
		switch f {
		case v1alpha1.ReleaseAddressFinalizer, v1alpha1.ProtectAddressFinalizer, metav1.FinalizerDeleteDependents, metav1.FinalizerOrphanDependents:
		default:
			out = append(out, f)
		}
	}
	return out
}

// releaseRecords releases every record of the claim: deleted at once, or
// marked released with the end of the pool's grace period, which keeps the
// address away from every manager (and survives restarts) until then.
func (r *Reconciler) releaseRecords(ctx context.Context, claim *ipamv1.IPAddressClaim, cid records.Claim, address *ipamv1.IPAddress) error {
	key, ok := index.KeyOfRef(claim.Spec.PoolRef, claim.Namespace)
	if !ok {
		return nil
	}
	var state *ledger.Pool
	grace := time.Duration(0)
	if pool, objKey := key.NewPool(); r.Client.Get(ctx, objKey, pool) == nil && pool.GetDeletionTimestamp().IsZero() {
		// A pool being deleted or gone hands nothing out again: no grace.
		if st, _ := r.Ledger.For(ctx, pool); st != nil {
			state = st
			grace = st.GracePeriod()
		}
	}
	found := map[string]*v1alpha1.MonolithIPAllocation{}
	list := &v1alpha1.MonolithIPAllocationList{}
	if err := r.Client.List(ctx, list, client.MatchingFields{index.AllocationClaimField: index.ClaimKey(claim.Namespace, claim.Name)}); err != nil {
		return fmt.Errorf("failed to list the allocation records of the claim: %w", err)
	}
	for i := range list.Items {
		if owns(&list.Items[i], cid) {
			found[list.Items[i].Name] = &list.Items[i]
		}
	}
	// Records the cache may not show yet: the ledger's hold and the
	// IPAddress's address, read past the cache.
	var candidates []netip.Addr
	if state != nil {
		if a, ok := state.AddressOf(cid); ok {
			candidates = append(candidates, a)
		}
	}
	if address != nil {
		if a, err := netip.ParseAddr(address.Spec.Address); err == nil {
			candidates = append(candidates, a)
		}
	}
	for _, a := range candidates {
		for _, overlap := range []bool{false, true} {
			name := records.Name(key, a, overlap)
			if _, ok := found[name]; ok {
				continue
			}
			rec := &v1alpha1.MonolithIPAllocation{}
			if err := r.APIReader.Get(ctx, client.ObjectKey{Name: name}, rec); err == nil && owns(rec, cid) {
				found[name] = rec
			} else if err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("failed to read allocation record %s: %w", name, err)
			}
		}
	}
	now := time.Now()
	until := time.Time{}
	for _, rec := range found {
		if err := r.releaseRecord(ctx, rec, now, grace); err != nil {
			return err
		}
	}
	if grace > 0 {
		until = now.Add(grace).Add(time.Second - 1).Truncate(time.Second)
	}
	if state != nil {
		state.ReleaseClaim(cid, until)
	}
	return nil
}

func (r *Reconciler) releaseRecord(ctx context.Context, rec *v1alpha1.MonolithIPAllocation, now time.Time, grace time.Duration) error {
	if grace <= 0 {
		ctrl.LoggerFrom(ctx).V(4).Info("Deleting allocation record", "record", rec.Name)
		if err := r.Client.Delete(ctx, rec, client.Preconditions{UID: &rec.UID}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("failed to delete allocation record %s: %w", rec.Name, err)
		}
		return nil
	}
	original := rec.DeepCopy()
	// Rounded up to the second (the precision of the stored time) so that
	// the address never comes back early.
	until := now.Add(grace).Add(time.Second - 1).Truncate(time.Second)
	rec.Status.ReleasedAt = &metav1.Time{Time: now}
	rec.Status.ReusableAfter = &metav1.Time{Time: until}
	if err := r.Client.Status().Patch(ctx, rec, client.MergeFromWithOptions(original, client.MergeFromWithOptimisticLock{})); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("failed to mark allocation record %s released: %w", rec.Name, err)
	}
	return nil
}
