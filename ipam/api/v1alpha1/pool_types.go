package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	// MonolithIPPoolKind is the kind of the namespaced pool.
	MonolithIPPoolKind = "MonolithIPPool"
	// GlobalMonolithIPPoolKind is the kind of the cluster-scoped pool.
	GlobalMonolithIPPoolKind = "GlobalMonolithIPPool"

	// ProtectPoolFinalizer keeps a pool while addresses from it are allocated.
	ProtectPoolFinalizer = "ipam.cluster.x-k8s.io/ProtectPool"
	// ReleaseAddressFinalizer is set on IPAddressClaims we fulfil, so that
	// their address is released before they go.
	ReleaseAddressFinalizer = "ipam.cluster.x-k8s.io/ReleaseAddress"
	// ProtectAddressFinalizer is set on the IPAddresses we create, so that an
	// address deleted by hand is re-created for its claim, never lost.
	ProtectAddressFinalizer = "ipam.cluster.x-k8s.io/ProtectAddress"

	// RequestedAddressAnnotation on an IPAddressClaim asks for one specific
	// address of the pool (a static reservation). The claim gets it when it
	// is free and allocatable in the pool; otherwise it stays Ready=False
	// with the reason.
	RequestedAddressAnnotation = "ipam.capi-monolith.dev/requested-address"

	// SkipDeleteProtectionAnnotation on a pool lets it be deleted while
	// addresses are allocated from it. It is meant for `clusterctl move`,
	// which deletes pools from the source cluster after moving them.
	SkipDeleteProtectionAnnotation = "ipam.capi-monolith.dev/skip-delete-protection"

	// ClusterctlDeleteForMoveAnnotation is what `clusterctl move` sets on
	// every object it deletes from the source cluster after copying it to
	// the target (Cluster API's clusterctl v1alpha3.DeleteForMoveAnnotation):
	// such a pool goes without waiting for its addresses, which live on in
	// the target.
	ClusterctlDeleteForMoveAnnotation = "clusterctl.cluster.x-k8s.io/delete-for-move"

	// AllowOverlapAnnotation on a pool lets its addresses overlap those of
	// other pools (e.g. the same private range behind different NATs). The
	// overlap is then reported as a warning instead of rejected.
	AllowOverlapAnnotation = "ipam.capi-monolith.dev/allow-overlap"
)

// DeleteProtectionSkipped reports whether the pool may be deleted while
// addresses are allocated from it: SkipDeleteProtectionAnnotation is "true",
// or clusterctl move is deleting it from the source cluster.
func DeleteProtectionSkipped(pool metav1.Object) bool {
	a := pool.GetAnnotations()
	_, moving := a[ClusterctlDeleteForMoveAnnotation]
	return moving || a[SkipDeleteProtectionAnnotation] == "true"
}

// Pool condition types and reasons.
const (
	// ReadyCondition is True when the pool's spec is valid and it can hand
	// out addresses (it may still be full).
	ReadyCondition = "Ready"

	// ReadyReason: the pool is valid.
	ReadyReason = "Ready"
	// InvalidSpecReason: the pool's spec cannot be parsed or breaks a rule
	// (only possible when the validating webhook is off).
	InvalidSpecReason = "InvalidSpec"
	// DeletionBlockedReason: the pool is being deleted but addresses are
	// still allocated from it.
	DeletionBlockedReason = "AddressesInUse"
)

// IPPoolSpec is the spec of both pool kinds.
type IPPoolSpec struct {
	// addresses of the pool: single IPs ("10.0.0.5"), ranges
	// ("10.0.0.10-10.0.0.20") or CIDRs ("10.0.1.0/24"). Entries may be
	// non-contiguous but must all lie in the subnet of the first address
	// and prefix, and be of one address family.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=1024
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=100
	// +listType=atomic
	// +required
	Addresses []string `json:"addresses"`

	// prefix is the subnet prefix length handed out with every address:
	// 1-32 for IPv4, 1-128 for IPv6.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=128
	// +required
	Prefix int32 `json:"prefix"`

	// gateway handed out with every address. Never allocated.
	// +kubebuilder:validation:MaxLength=50
	// +optional
	Gateway string `json:"gateway,omitempty"`

	// excludedAddresses are never handed out; same forms as addresses.
	// +kubebuilder:validation:MaxItems=1024
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=100
	// +listType=atomic
	// +optional
	ExcludedAddresses []string `json:"excludedAddresses,omitempty"`

	// allocateReservedIPAddresses hands out the subnet's network address and
	// IPv4 broadcast address (the IPv6 subnet-router anycast address) too.
	// The gateway is never handed out.
	// +optional
	AllocateReservedIPAddresses bool `json:"allocateReservedIPAddresses,omitempty"`

	// addressReuseGracePeriodSeconds keeps a released address from being
	// handed out again for this long, so that stale ARP entries and leases
	// expire first. 0 (the default) reuses addresses at once.
	// +kubebuilder:validation:Minimum=0
	// +optional
	AddressReuseGracePeriodSeconds int32 `json:"addressReuseGracePeriodSeconds,omitempty"`
}

// IPAddressesStatus counts the pool's addresses.
type IPAddressesStatus struct {
	// total is the number of addresses the pool can hand out.
	// +optional
	Total int64 `json:"total"`
	// used is the number of those addresses allocated (or cooling down in
	// their reuse grace period).
	// +optional
	Used int64 `json:"used"`
	// free is total minus used.
	// +optional
	Free int64 `json:"free"`
	// outOfRange is the number of IPAddresses of this pool whose address the
	// pool can no longer hand out (after a change of its addresses).
	// +optional
	OutOfRange int64 `json:"outOfRange"`
	// capped is true when total or free exceed what an int64 holds (large
	// IPv6 pools) and are reported as 9223372036854775807.
	// +optional
	Capped bool `json:"capped,omitempty"`
}

// IPPoolStatus is the observed state of both pool kinds.
type IPPoolStatus struct {
	// ipAddresses counts the pool's addresses.
	// +optional
	IPAddresses *IPAddressesStatus `json:"ipAddresses,omitempty"`

	// conditions of the pool: Ready.
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// MonolithIPPool is a namespaced pool of IP addresses for the
// IPAddressClaims of its namespace.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=monolithippools,scope=Namespaced,categories=cluster-api
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:metadata:labels="clusterctl.cluster.x-k8s.io/move-hierarchy="
// +kubebuilder:printcolumn:name="Addresses",type="string",JSONPath=".spec.addresses",description="Addresses of the pool"
// +kubebuilder:printcolumn:name="Total",type="integer",JSONPath=".status.ipAddresses.total",description="Addresses the pool can hand out"
// +kubebuilder:printcolumn:name="Free",type="integer",JSONPath=".status.ipAddresses.free",description="Addresses still free"
// +kubebuilder:printcolumn:name="Used",type="integer",JSONPath=".status.ipAddresses.used",description="Addresses allocated"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
type MonolithIPPool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   IPPoolSpec   `json:"spec,omitempty"`
	Status IPPoolStatus `json:"status,omitempty"`
}

// MonolithIPPoolList is a list of MonolithIPPools.
//
// +kubebuilder:object:root=true
type MonolithIPPoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MonolithIPPool `json:"items"`
}

// GlobalMonolithIPPool is a cluster-scoped pool of IP addresses for the
// IPAddressClaims of every namespace.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=globalmonolithippools,scope=Cluster,categories=cluster-api
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:metadata:labels="clusterctl.cluster.x-k8s.io/move-hierarchy="
// +kubebuilder:printcolumn:name="Addresses",type="string",JSONPath=".spec.addresses",description="Addresses of the pool"
// +kubebuilder:printcolumn:name="Total",type="integer",JSONPath=".status.ipAddresses.total",description="Addresses the pool can hand out"
// +kubebuilder:printcolumn:name="Free",type="integer",JSONPath=".status.ipAddresses.free",description="Addresses still free"
// +kubebuilder:printcolumn:name="Used",type="integer",JSONPath=".status.ipAddresses.used",description="Addresses allocated"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
type GlobalMonolithIPPool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   IPPoolSpec   `json:"spec,omitempty"`
	Status IPPoolStatus `json:"status,omitempty"`
}

// GlobalMonolithIPPoolList is a list of GlobalMonolithIPPools.
//
// +kubebuilder:object:root=true
type GlobalMonolithIPPoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []GlobalMonolithIPPool `json:"items"`
}

func init() {
	schemeBuilder.Register(&MonolithIPPool{}, &MonolithIPPoolList{}, &GlobalMonolithIPPool{}, &GlobalMonolithIPPoolList{})
}
