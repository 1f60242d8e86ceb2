package claim

import (
	corev1 "k8s.io/api/core/v1"
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

// notReady sets Ready=False and, when the reason or message is new, emits
// a Warning Event, so that an operator sees every claim that cannot be
// served in `kubectl get events` as well as on the claim.
func (r *Reconciler) notReady(claim *ipamv1.IPAddressClaim, reason, message string) {
	if c := conditions.Get(claim, ipamv1.IPAddressClaimReadyCondition); r.Recorder != nil &&
		(c == nil || c.Status != metav1.ConditionFalse || c.Reason != reason || c.Message != message) {
		r.Recorder.Eventf(claim, nil, corev1.EventTypeWarning, reason, "Allocate", "%s", message)
	}
	setNotReady(claim, reason, message)
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
