package claim

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
)

// AllocatedReason is the Ready reason of a claim that has its address.
const AllocatedReason = "Allocated"

func setBound(claim *ipamv1.IPAddressClaim, address *ipamv1.IPAddress) {
	claim.Status.AddressRef = ipamv1.IPAddressReference{Name: address.Name}
	conditions.Set(claim, metav1.Condition{
		Type:               ipamv1.IPAddressClaimReadyCondition,
		Status:             metav1.ConditionTrue,
		Reason:             AllocatedReason,
		Message:            "Address " + address.Spec.Address + " allocated",
		ObservedGeneration: claim.Generation,
	})
}

func setNotReady(claim *ipamv1.IPAddressClaim, reason, message string) {
	conditions.Set(claim, metav1.Condition{
		Type:               ipamv1.IPAddressClaimReadyCondition,
		Status:             metav1.ConditionFalse,
		Reason:             reason,
		Message:            message,
		ObservedGeneration: claim.Generation,
	})
}
