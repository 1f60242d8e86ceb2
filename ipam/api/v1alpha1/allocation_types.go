package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	// MonolithIPAllocationKind is the kind of the allocation record.
	MonolithIPAllocationKind = "MonolithIPAllocation"
)

// AllocationClaimReference names the IPAddressClaim an address is allocated to.
type AllocationClaimReference struct {
	// namespace of the claim.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +required
	Namespace string `json:"namespace"`
	// name of the claim.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`
	// uid of the claim, so that a claim deleted and re-created under the
	// same name is told apart from the one the address was allocated to.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	UID string `json:"uid,omitempty"`
}

// AllocationPoolReference names the pool an address is allocated from.
type AllocationPoolReference struct {
	// kind of the pool: MonolithIPPool or GlobalMonolithIPPool.
	// +kubebuilder:validation:Enum=MonolithIPPool;GlobalMonolithIPPool
	// +required
	Kind string `json:"kind"`
	// namespace of the pool; empty for a GlobalMonolithIPPool.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// name of the pool.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`
}

// MonolithIPAllocationSpec is one address handed out, and what it was
// handed out with. It is immutable once created.
type MonolithIPAllocationSpec struct {
	// address allocated.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=50
	// +required
	Address string `json:"address"`
	// prefix the address was handed out with; a re-created IPAddress gets it
	// again, whatever the pool says now.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=128
	// +required
	Prefix int32 `json:"prefix"`
	// gateway the address was handed out with; empty when none.
	// +kubebuilder:validation:MaxLength=50
	// +optional
	Gateway string `json:"gateway,omitempty"`
	// poolRef is the pool the address is from.
	// +required
	PoolRef AllocationPoolReference `json:"poolRef"`
	// claimRef is the claim the address is allocated to.
	// +required
	ClaimRef AllocationClaimReference `json:"claimRef"`
}

// MonolithIPAllocationStatus is set when the address is released.
type MonolithIPAllocationStatus struct {
	// releasedAt is when the claim let the address go. A released record
	// no longer holds the address for its claim; it keeps the address away
	// from everyone until reusableAfter, and may then be deleted.
	// +optional
	ReleasedAt *metav1.Time `json:"releasedAt,omitempty"`
	// reusableAfter is the end of the pool's addressReuseGracePeriodSeconds
	// for the released address.
	// +optional
	ReusableAfter *metav1.Time `json:"reusableAfter,omitempty"`
}

// MonolithIPAllocation records that one address is taken. Its name is
// derived from the address (and, for pools that allow overlapping, from the
// pool), so the apiserver refuses a second record for the same address:
// that refusal, not the memory of one process, is what keeps an address
// from being handed out twice. It is written and read by the ipam module
// only.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=monolithipallocations,scope=Cluster,categories=cluster-api
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:printcolumn:name="Address",type="string",JSONPath=".spec.address",description="Address allocated"
// +kubebuilder:printcolumn:name="Pool",type="string",JSONPath=".spec.poolRef.name",description="Pool of the address"
// +kubebuilder:printcolumn:name="Claim",type="string",JSONPath=".spec.claimRef.name",description="Claim holding the address"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
type MonolithIPAllocation struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is immutable"
	Spec MonolithIPAllocationSpec `json:"spec,omitempty"`
	// +optional
	Status MonolithIPAllocationStatus `json:"status,omitempty"`
}

// MonolithIPAllocationList is a list of MonolithIPAllocations.
//
// +kubebuilder:object:root=true
type MonolithIPAllocationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MonolithIPAllocation `json:"items"`
}

// IsReleased tells whether the record's address was released: it only
// keeps the address cooling down until ReusableAfter.
func (a *MonolithIPAllocation) IsReleased() bool {
	return a.Status.ReleasedAt != nil
}

func init() {
	schemeBuilder.Register(&MonolithIPAllocation{}, &MonolithIPAllocationList{})
}
