package claim

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/capi-monolith/capi-monolith/contracts/scaffold"
)

// AllocatedReason is the Ready reason of a claim that has its address.
const AllocatedReason = "Allocated"

// scope is what one reconcile of one IPAddressClaim knows.
type scope = scaffold.ScopeWith[*ipamv1.IPAddressClaim, results]

// results are what the phases of one reconcile found about the claim: the
// IPAddress it is bound to, or why it is not Ready. Both nil: the phases
// decided nothing (waiting, retrying), and what an earlier reconcile
// recorded stays.
type results struct {
	bound    *ipamv1.IPAddress
	notReady *notReady
}

// notReady is why a claim cannot be served.
type notReady struct {
	reason, message string
}

// bind records that the claim is bound to address; the last of bind and
// fail in a reconcile wins.
func (res *results) bind(address *ipamv1.IPAddress) {
	res.bound, res.notReady = address, nil
}

// fail records why the claim cannot be served; the last of bind and fail
// in a reconcile wins.
func (res *results) fail(reason, message string) {
	res.bound, res.notReady = nil, &notReady{reason: reason, message: message}
}

// UpdateStatus implements scaffold.PhasesWith: the one place the claim's
// Ready condition and addressRef are set, from what the phases recorded.
func (r *Reconciler) UpdateStatus(_ context.Context, s *scope) {
	switch res := s.Results; {
	case res.bound != nil:
		setBound(s.Object, res.bound)
	case res.notReady != nil:
		r.setNotReadyAndWarn(s.Object, *res.notReady)
	}
}

// setBound points the claim at its IPAddress and makes it Ready.
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

// setNotReadyAndWarn sets Ready=False and, when the reason or message is
// new, emits a Warning Event, so that an operator sees every claim that
// cannot be served in `kubectl get events` as well as on the claim.
func (r *Reconciler) setNotReadyAndWarn(claim *ipamv1.IPAddressClaim, why notReady) {
	if c := conditions.Get(claim, ipamv1.IPAddressClaimReadyCondition); r.Recorder != nil &&
		(c == nil || c.Status != metav1.ConditionFalse || c.Reason != why.reason || c.Message != why.message) {
		r.Recorder.Eventf(claim, nil, corev1.EventTypeWarning, why.reason, "Allocate", "%s", why.message)
	}
	setNotReady(claim, why)
}

func setNotReady(claim *ipamv1.IPAddressClaim, why notReady) {
	conditions.Set(claim, metav1.Condition{
		Type:               ipamv1.IPAddressClaimReadyCondition,
		Status:             metav1.ConditionFalse,
		Reason:             why.reason,
		Message:            why.message,
		ObservedGeneration: claim.Generation,
	})
}
