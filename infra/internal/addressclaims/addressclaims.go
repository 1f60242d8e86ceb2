// Package addressclaims claims the addresses a MonolithMachine asks of IP
// pools (spec.addressesFromPools), as Cluster API's IPAM contract wants of
// an infrastructure provider: one IPAddressClaim per pool, named
// <machine>-<index>, owned by the machine and holding a finalizer until the
// machine's node is gone. A claim is found by name but used, and released,
// only when this very machine (by UID) controls it and it is not being
// deleted. The one MonolithMachine controller claims through it for every
// machine, pool instances included.
package addressclaims

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/infra/internal/backend"
)

// ClaimName is the name of the IPAddressClaim a machine makes of its
// index-th pool.
func ClaimName(machine string, index int) string { return fmt.Sprintf("%s-%d", machine, index) }

// Result is what Reconcile found.
type Result struct {
	// Static are the claimed addresses, once Ready.
	Static []backend.StaticAddress
	// Ready is true once every claim is fulfilled, or at once for a
	// machine that names no pool.
	Ready bool
	// Progress says how the claims stand, for the machine's
	// IPAddressesClaimed condition; nil for a machine that names no pool
	// (it gets no condition).
	Progress *Progress
}

// Progress is how a machine's claims stand.
type Progress struct {
	// Claimed is true once every claim is fulfilled.
	Claimed bool
	// Reason and Message say why not yet: v1alpha1.WaitingForIPAddressesReason,
	// the IPAM provider's reason for a claim it cannot serve, or
	// v1alpha1.FailedReason.
	Reason, Message string
}

// Reconcile makes one IPAddressClaim per pool the machine names and returns
// the addresses once every claim is fulfilled (ready), with how the claims
// stand.
func Reconcile(ctx context.Context, c client.Client, mm *v1alpha1.MonolithMachine, cluster *clusterv1.Cluster) (Result, error) {
	pools := mm.Spec.AddressesFromPools
	if len(pools) == 0 {
		return Result{Ready: true}, nil
	}
	var static []backend.StaticAddress
	pending := 0
	// blocked is why the first waiting claim cannot be served, as the
	// IPAM provider says on it (PoolExhausted, PoolNotReady, ...): shown
	// on the machine, and through its Ready on the Machine, instead of a
	// bare count.
	var blocked *metav1.Condition
	for i, pool := range pools {
		claim := &ipamv1.IPAddressClaim{}
		key := client.ObjectKey{Namespace: mm.Namespace, Name: ClaimName(mm.Name, i)}
		err := c.Get(ctx, key, claim)
		if apierrors.IsNotFound(err) {
			claim = newClaim(mm, cluster, key.Name, ipamv1.IPPoolReference{APIGroup: ptr.Deref(pool.APIGroup, ""), Kind: pool.Kind, Name: pool.Name})
			if err := c.Create(ctx, claim); err != nil && !apierrors.IsAlreadyExists(err) {
				return Result{}, fmt.Errorf("failed to create IPAddressClaim %s: %w", key.Name, err)
			}
			pending++
			continue
		}
		if err != nil {
			return Result{}, fmt.Errorf("failed to get IPAddressClaim %s: %w", key.Name, err)
		}
		if !ownedBy(claim, mm) {
			if !claim.DeletionTimestamp.IsZero() {
				// A claim of an earlier machine of this name, going away:
				// ours is made once the name is free.
				pending++
				continue
			}
			// Never use (or later delete) what another object claimed.
			msg := fmt.Sprintf("IPAddressClaim %s exists and belongs to another object; delete it or rename the machine", key.Name)
			return failed(msg), errors.New(msg)
		}
		if !claim.DeletionTimestamp.IsZero() {
			// Our claim is being deleted while the machine lives: its
			// address is on its way back to the pool, so it is not used.
			// Before the node exists, let it go and claim again.
			if !ptr.Deref(mm.Status.Initialization.Provisioned, false) {
				if err := removeFinalizer(ctx, c, claim); err != nil {
					return Result{}, err
				}
			}
			pending++
			continue
		}
		if claim.Status.AddressRef.Name == "" {
			pending++
			if blocked == nil {
				blocked = whyWaiting(claim)
			}
			continue
		}
		address := &ipamv1.IPAddress{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: mm.Namespace, Name: claim.Status.AddressRef.Name}, address); err != nil {
			if apierrors.IsNotFound(err) {
				// Bound, but the address is not in our cache yet: its own
				// event brings the machine back (MachineOfAddress).
				pending++
				if blocked == nil {
					blocked = &metav1.Condition{Reason: v1alpha1.WaitingForIPAddressesReason,
						Message: fmt.Sprintf("IPAddressClaim %s: bound to IPAddress %s, not found yet", claim.Name, claim.Status.AddressRef.Name)}
				}
				continue
			}
			return Result{}, fmt.Errorf("failed to get IPAddress %s: %w", claim.Status.AddressRef.Name, err)
		}
		s, err := staticAddress(address)
		if err != nil {
			return failed(err.Error()), nil
		}
		static = append(static, s)
	}
	if pending > 0 {
		waiting := fmt.Sprintf("Waiting for %d of %d IP addresses", pending, len(pools))
		if blocked != nil {
			return Result{Progress: &Progress{Reason: blocked.Reason, Message: fmt.Sprintf("%s; %s", blocked.Message, waiting)}}, nil
		}
		return Result{Progress: &Progress{Reason: v1alpha1.WaitingForIPAddressesReason, Message: waiting}}, nil
	}
	return Result{Static: static, Ready: true, Progress: &Progress{Claimed: true}}, nil
}

func failed(message string) Result {
	return Result{Progress: &Progress{Reason: v1alpha1.FailedReason, Message: message}}
}

// whyWaiting returns the reason and message to show for a claim its IPAM
// provider reports as not servable (Ready=False with a reason), nil when it
// says nothing yet. The message names the claim and carries the reason, so
// that a summary that keeps only messages (the machine's Ready, mirrored to
// the Machine) still says it; the provider's message names the pool.
func whyWaiting(claim *ipamv1.IPAddressClaim) *metav1.Condition {
	cond := conditions.Get(claim, ipamv1.IPAddressClaimReadyCondition)
	if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason == "" {
		return nil
	}
	detail := cond.Message
	if detail == "" {
		detail = fmt.Sprintf("pool %s %s", claim.Spec.PoolRef.Kind, claim.Spec.PoolRef.Name)
	}
	return &metav1.Condition{Reason: cond.Reason, Message: fmt.Sprintf("IPAddressClaim %s: %s: %s", claim.Name, cond.Reason, detail)}
}

func newClaim(mm *v1alpha1.MonolithMachine, cluster *clusterv1.Cluster, name string, pool ipamv1.IPPoolReference) *ipamv1.IPAddressClaim {
	return &ipamv1.IPAddressClaim{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: mm.Namespace,
			Name:      name,
			Labels:    map[string]string{clusterv1.ClusterNameLabel: cluster.Name},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: v1alpha1.GroupVersion.String(), Kind: "MonolithMachine", Name: mm.Name, UID: mm.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
			// The address stays allocated until our node is gone.
			Finalizers: []string{v1alpha1.ClaimFinalizer},
		},
		Spec: ipamv1.IPAddressClaimSpec{ClusterName: cluster.Name, PoolRef: pool},
	}
}

func staticAddress(a *ipamv1.IPAddress) (backend.StaticAddress, error) {
	addr, err := netip.ParseAddr(a.Spec.Address)
	if err != nil {
		return backend.StaticAddress{}, fmt.Errorf("IPAddress %s has an invalid address %q", a.Name, a.Spec.Address)
	}
	s := backend.StaticAddress{Address: addr, Prefix: int(ptr.Deref(a.Spec.Prefix, int32(addr.BitLen())))}
	if a.Spec.Gateway != "" {
		if s.Gateway, err = netip.ParseAddr(a.Spec.Gateway); err != nil {
			return backend.StaticAddress{}, fmt.Errorf("IPAddress %s has an invalid gateway %q", a.Name, a.Spec.Gateway)
		}
	}
	return s, nil
}

// Release lets the machine's claims go: our finalizer off, then deleted, so
// that the IPAM provider releases their addresses. Call it only once the
// machine's node is gone.
func Release(ctx context.Context, c client.Client, mm *v1alpha1.MonolithMachine) error {
	for i := range mm.Spec.AddressesFromPools {
		claim := &ipamv1.IPAddressClaim{}
		key := client.ObjectKey{Namespace: mm.Namespace, Name: ClaimName(mm.Name, i)}
		if err := c.Get(ctx, key, claim); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return fmt.Errorf("failed to get IPAddressClaim %s: %w", key.Name, err)
		}
		if !ownedBy(claim, mm) {
			// Another object's claim of the same name is not ours to free.
			continue
		}
		if err := removeFinalizer(ctx, c, claim); err != nil {
			return err
		}
		if claim.DeletionTimestamp.IsZero() {
			if err := c.Delete(ctx, claim); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("failed to delete IPAddressClaim %s: %w", key.Name, err)
			}
		}
	}
	return nil
}

// ownedBy reports whether mm (this very object, by UID) controls claim:
// claims are found by name, and a name can be taken by another object or
// by an earlier machine of the same name.
func ownedBy(claim *ipamv1.IPAddressClaim, mm *v1alpha1.MonolithMachine) bool {
	ref := metav1.GetControllerOf(claim)
	return ref != nil && ref.UID == mm.UID
}

// removeFinalizer takes our finalizer off claim.
func removeFinalizer(ctx context.Context, c client.Client, claim *ipamv1.IPAddressClaim) error {
	if !controllerutil.ContainsFinalizer(claim, v1alpha1.ClaimFinalizer) {
		return nil
	}
	original := claim.DeepCopy()
	controllerutil.RemoveFinalizer(claim, v1alpha1.ClaimFinalizer)
	if err := c.Patch(ctx, claim, client.MergeFrom(original)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("failed to remove our finalizer from IPAddressClaim %s: %w", claim.Name, err)
	}
	return nil
}

// MachineOfAddress maps an IPAddress to the MonolithMachine whose claim it
// fulfils, through the claim's controller reference. An IPAM provider
// creates the address, then binds the claim to it; the two reach our cache
// through different watches, so a machine can see its claim bound before
// the address is in the cache. The address's own event brings the machine
// back then: nothing else would.
func MachineOfAddress(c client.Reader) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		address, ok := o.(*ipamv1.IPAddress)
		if !ok || address.Spec.ClaimRef.Name == "" {
			return nil
		}
		claim := &ipamv1.IPAddressClaim{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: address.Namespace, Name: address.Spec.ClaimRef.Name}, claim); err != nil {
			return nil
		}
		ref := metav1.GetControllerOf(claim)
		if ref == nil || ref.Kind != "MonolithMachine" {
			return nil
		}
		if gv, err := schema.ParseGroupVersion(ref.APIVersion); err != nil || gv.Group != v1alpha1.GroupVersion.Group {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: address.Namespace, Name: ref.Name}}}
	}
}
