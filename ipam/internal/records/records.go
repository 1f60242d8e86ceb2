// Package records names and reads the ipam module's allocation records
// (MonolithIPAllocation): one cluster-scoped object per address handed out,
// whose name the apiserver keeps unique. Creating the record is what takes
// an address; AlreadyExists means someone else has it.
//
// A pool that does not allow overlapping shares one name space with every
// other such pool: its records are named after the address alone, so two
// overlapping pools (however they got past the webhook) collide on the same
// record. A pool with the allow-overlap annotation names its records after
// itself and the address, so that the same address may live in it and in
// another pool.
package records

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/capi-monolith/capi-monolith/ipam/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/ipam/internal/index"
)

// Name is the record name of addr in the pool key; allowOverlap tells
// whether the pool carries the allow-overlap annotation.
func Name(key index.PoolKey, addr netip.Addr, allowOverlap bool) string {
	a := addrName(addr)
	if !allowOverlap {
		return a
	}
	// Pool names may be 253 characters long: a hash keeps the record name
	// within the apiserver's limit. The record's spec names the pool.
	sum := sha256.Sum256([]byte(key.String()))
	return "p" + hex.EncodeToString(sum[:8]) + "-" + a
}

// IsOverlapName tells whether a record name is one of a pool with the
// allow-overlap annotation (named after the pool and the address).
func IsOverlapName(name string) bool {
	return strings.HasPrefix(name, "p")
}

// addrName spells an address as a DNS subdomain: IPv4 as is, IPv6 in its
// expanded form with dashes, so that it starts and ends with a hex digit.
func addrName(addr netip.Addr) string {
	if addr.Is4() {
		return "v4-" + addr.String()
	}
	return "v6-" + strings.ReplaceAll(addr.StringExpanded(), ":", "-")
}

// AllowsOverlap tells whether the pool carries the allow-overlap annotation.
func AllowsOverlap(p v1alpha1.Pool) bool {
	return p.GetAnnotations()[v1alpha1.AllowOverlapAnnotation] == "true"
}

// PoolKey returns the key of the record's pool.
func PoolKey(r *v1alpha1.MonolithIPAllocation) index.PoolKey {
	return index.KeyOfAllocation(r)
}

// Claim is the identity of the claim an address is allocated to: a claim
// re-created under the same name is another claim.
type Claim struct {
	types.NamespacedName
	UID types.UID
}

// ClaimOf returns the record's claim.
func ClaimOf(r *v1alpha1.MonolithIPAllocation) Claim {
	return Claim{
		NamespacedName: types.NamespacedName{Namespace: r.Spec.ClaimRef.Namespace, Name: r.Spec.ClaimRef.Name},
		UID:            types.UID(r.Spec.ClaimRef.UID),
	}
}

// Orphaned tells whether a live record's claim is gone, read past the
// cache with reader: no claim of the record's namespace and name, or one
// with another uid (re-created since). A record of a released claim is not
// an orphan: its grace period ends it.
func Orphaned(ctx context.Context, reader client.Reader, r *v1alpha1.MonolithIPAllocation) (bool, error) {
	if r.IsReleased() {
		return false, nil
	}
	c := ClaimOf(r)
	claim := &ipamv1.IPAddressClaim{}
	if err := reader.Get(ctx, c.NamespacedName, claim); err != nil {
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, fmt.Errorf("failed to read claim %s of allocation record %s: %w", c.NamespacedName, r.Name, err)
	}
	return c.UID != "" && claim.UID != c.UID, nil
}

// ReusableAfter returns when a released record's address may be handed out
// again; ok is false for a record that is not released. A released record
// without the time is reusable now: its grace period cannot be known, and
// keeping it forever would leak the address.
func ReusableAfter(r *v1alpha1.MonolithIPAllocation) (at time.Time, ok bool) {
	if !r.IsReleased() {
		return time.Time{}, false
	}
	if r.Status.ReusableAfter == nil {
		return time.Time{}, true
	}
	return r.Status.ReusableAfter.Time, true
}
