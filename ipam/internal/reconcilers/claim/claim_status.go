package claim

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capi-monolith/capi-monolith/contracts/scaffold"
)

// AllocatedReason is the Ready reason of a claim that has its address.
const AllocatedReason = "Allocated"

// outcome is what the phases found about a claim in one reconcile: the
// IPAddress it is bound to, or why it is not Ready.
type outcome struct {
	address         *ipamv1.IPAddress
	reason, message string
}

// bind records that the claim is bound to address.
func (r *Reconciler) bind(claim *ipamv1.IPAddressClaim, address *ipamv1.IPAddress) {
	r.outcomes.Store(client.ObjectKeyFromObject(claim), outcome{address: address})
}

// fail records why the claim cannot be served.
func (r *Reconciler) fail(claim *ipamv1.IPAddressClaim, reason, message string) {
	r.outcomes.Store(client.ObjectKeyFromObject(claim), outcome{reason: reason, message: message})
}

// UpdateStatus implements scaffold.Phases: the one place the claim's Ready
// condition and addressRef are set, from what the phases recorded. A
// reconcile that recorded nothing (waiting, retrying) leaves them as they
// are.
func (r *Reconciler) UpdateStatus(_ context.Context, s *scaffold.Scope[*ipamv1.IPAddressClaim]) {
	v, ok := r.outcomes.LoadAndDelete(client.ObjectKeyFromObject(s.Object))
	if !ok {
		return
	}
	switch o := v.(outcome); {
	case o.address != nil:
		setBound(s.Object, o.address)
	default:
		r.notReady(s.Object, o.reason, o.message)
	}
}

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
