// Package index names the pools of the ipam module and registers the cache
// indexes that find a pool's IPAddresses and IPAddressClaims without
// listing everything.
package index

import (
	"context"
	"fmt"
	"reflect"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/capi-monolith/capi-monolith/ipam/api/v1alpha1"
)

const (
	// IPAddressPoolField indexes IPAddresses by the key of their pool.
	IPAddressPoolField = "ipam.capi-monolith.dev/pool"
	// ClaimPoolField indexes IPAddressClaims by the key of their pool.
	ClaimPoolField = "ipam.capi-monolith.dev/claim-pool"
	// ClaimClusterField indexes our IPAddressClaims by the name of their
	// Cluster: spec.clusterName, else the cluster-name label.
	ClaimClusterField = "ipam.capi-monolith.dev/claim-cluster"
	// AllocationPoolField indexes MonolithIPAllocations by the key of their
	// pool.
	AllocationPoolField = "ipam.capi-monolith.dev/allocation-pool"
	// AllocationClaimField indexes MonolithIPAllocations by their claim's
	// "namespace/name".
	AllocationClaimField = "ipam.capi-monolith.dev/allocation-claim"
)

// KeyOfAllocation returns the key of an allocation record's pool.
func KeyOfAllocation(r *v1alpha1.MonolithIPAllocation) PoolKey {
	return PoolKey{Kind: r.Spec.PoolRef.Kind, Namespace: r.Spec.PoolRef.Namespace, Name: r.Spec.PoolRef.Name}
}

// ClaimKey is the AllocationClaimField value of a claim.
func ClaimKey(namespace, name string) string { return namespace + "/" + name }

// ClusterOfClaim is the name of a claim's Cluster: spec.clusterName, else
// the cluster.x-k8s.io/cluster-name label; empty when it has none.
func ClusterOfClaim(c *ipamv1.IPAddressClaim) string {
	if c.Spec.ClusterName != "" {
		return c.Spec.ClusterName
	}
	return c.Labels[clusterv1.ClusterNameLabel]
}

// PoolKey identifies one of our pools; Namespace is empty for global pools.
type PoolKey struct {
	Kind      string
	Namespace string
	Name      string
}

// String is the key's index value, e.g. "MonolithIPPool/ns/name".
func (k PoolKey) String() string { return k.Kind + "/" + k.Namespace + "/" + k.Name }

// KeyOf returns the key of a pool object.
func KeyOf(p v1alpha1.Pool) PoolKey {
	return PoolKey{Kind: kindOf(p), Namespace: p.GetNamespace(), Name: p.GetName()}
}

func kindOf(p v1alpha1.Pool) string {
	t := reflect.TypeOf(p)
	for _, k := range v1alpha1.PoolKinds {
		if reflect.TypeOf(k.New()) == t {
			return k.Kind
		}
	}
	return ""
}

// KeyOfRef returns the key of the pool a reference made from namespace
// names, and false when the reference is not to one of our kinds (another
// provider's pool, or an empty apiGroup left by v1beta1 conversion).
func KeyOfRef(ref ipamv1.IPPoolReference, namespace string) (PoolKey, bool) {
	if ref.APIGroup != v1alpha1.GroupVersion.Group || ref.Name == "" {
		return PoolKey{}, false
	}
	kind, ok := v1alpha1.PoolKindNamed(ref.Kind)
	if !ok {
		return PoolKey{}, false
	}
	key := kind.Key(namespace, ref.Name)
	return PoolKey{Kind: kind.Kind, Namespace: key.Namespace, Name: key.Name}, true
}

// NewPool returns an empty object of the key's kind, and its object key.
func (k PoolKey) NewPool() (v1alpha1.Pool, client.ObjectKey) {
	kind, ok := v1alpha1.PoolKindNamed(k.Kind)
	if !ok {
		// Keys come from KeyOf and KeyOfRef, which know only our kinds.
		kind = v1alpha1.PoolKinds[0]
	}
	return kind.New(), kind.Key(k.Namespace, k.Name)
}

// Setup registers the indexes on the shared cache.
func Setup(ctx context.Context, mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &ipamv1.IPAddress{}, IPAddressPoolField, func(o client.Object) []string {
		a := o.(*ipamv1.IPAddress)
		if k, ok := KeyOfRef(a.Spec.PoolRef, a.Namespace); ok {
			return []string{k.String()}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("failed to index IPAddresses by pool: %w", err)
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &ipamv1.IPAddressClaim{}, ClaimPoolField, func(o client.Object) []string {
		c := o.(*ipamv1.IPAddressClaim)
		if k, ok := KeyOfRef(c.Spec.PoolRef, c.Namespace); ok {
			return []string{k.String()}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("failed to index IPAddressClaims by pool: %w", err)
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &ipamv1.IPAddressClaim{}, ClaimClusterField, func(o client.Object) []string {
		if name := ClusterOfClaim(o.(*ipamv1.IPAddressClaim)); name != "" {
			return []string{name}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("failed to index IPAddressClaims by cluster: %w", err)
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &v1alpha1.MonolithIPAllocation{}, AllocationPoolField, func(o client.Object) []string {
		return []string{KeyOfAllocation(o.(*v1alpha1.MonolithIPAllocation)).String()}
	}); err != nil {
		return fmt.Errorf("failed to index MonolithIPAllocations by pool: %w", err)
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &v1alpha1.MonolithIPAllocation{}, AllocationClaimField, func(o client.Object) []string {
		r := o.(*v1alpha1.MonolithIPAllocation)
		return []string{ClaimKey(r.Spec.ClaimRef.Namespace, r.Spec.ClaimRef.Name)}
	}); err != nil {
		return fmt.Errorf("failed to index MonolithIPAllocations by claim: %w", err)
	}
	return nil
}
