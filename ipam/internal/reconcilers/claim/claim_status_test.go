package claim

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
)

func TestResultsLastOfBindAndFailWins(t *testing.T) {
	address := &ipamv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: "a"}}
	tests := []struct {
		name         string
		record       func(*results)
		wantBound    bool
		wantNotReady *notReady
	}{
		{name: "nothing recorded decides nothing", record: func(*results) {}},
		{name: "a bind after a failure binds", record: func(r *results) { r.fail("R", "m"); r.bind(address) }, wantBound: true},
		{name: "a failure after a bind fails", record: func(r *results) { r.bind(address); r.fail("R", "m") }, wantNotReady: &notReady{reason: "R", message: "m"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			var res results
			tt.record(&res)
			g.Expect(res.bound != nil).To(Equal(tt.wantBound))
			g.Expect(res.notReady).To(Equal(tt.wantNotReady))
		})
	}
}

func TestUpdateStatus(t *testing.T) {
	address := &ipamv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: "a-0"}, Spec: ipamv1.IPAddressSpec{Address: "10.0.0.10"}}
	before := metav1.Condition{Type: ipamv1.IPAddressClaimReadyCondition, Status: metav1.ConditionFalse, Reason: "Before", Message: "before"}
	tests := []struct {
		name           string
		results        results
		wantAddressRef string
		wantCondition  metav1.Condition
	}{
		{name: "a reconcile that decided nothing leaves the status as it was", wantCondition: before},
		{name: "a bound claim points at its IPAddress and is Ready with the address",
			results: results{bound: address}, wantAddressRef: "a-0",
			wantCondition: metav1.Condition{Type: ipamv1.IPAddressClaimReadyCondition, Status: metav1.ConditionTrue, Reason: AllocatedReason, Message: "Address 10.0.0.10 allocated"}},
		{name: "a claim that cannot be served is not Ready, with why",
			results:       results{notReady: &notReady{reason: ipamv1.IPAddressClaimReadyPoolExhaustedReason, message: "MonolithIPPool ns/p has no free address"}},
			wantCondition: metav1.Condition{Type: ipamv1.IPAddressClaimReadyCondition, Status: metav1.ConditionFalse, Reason: ipamv1.IPAddressClaimReadyPoolExhaustedReason, Message: "MonolithIPPool ns/p has no free address"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			claim := &ipamv1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Generation: 4}}
			conditions.Set(claim, before)
			(&Reconciler{}).UpdateStatus(t.Context(), &scope{Object: claim, Results: tt.results})
			g.Expect(claim.Status.AddressRef.Name).To(Equal(tt.wantAddressRef))
			got := conditions.Get(claim, ipamv1.IPAddressClaimReadyCondition)
			g.Expect(got).NotTo(BeNil())
			g.Expect(got.Status).To(Equal(tt.wantCondition.Status))
			g.Expect(got.Reason).To(Equal(tt.wantCondition.Reason))
			g.Expect(got.Message).To(Equal(tt.wantCondition.Message))
		})
	}
}

func TestSetNotReadyAndWarn(t *testing.T) {
	why := notReady{reason: ipamv1.IPAddressClaimReadyPoolExhaustedReason, message: "MonolithIPPool ns/p has no free address"}
	tests := []struct {
		name       string
		before     *metav1.Condition
		wantEvents []string
	}{
		{name: "a first failure emits a Warning", wantEvents: []string{"Warning PoolExhausted MonolithIPPool ns/p has no free address"}},
		{name: "the same failure again emits nothing",
			before: &metav1.Condition{Type: ipamv1.IPAddressClaimReadyCondition, Status: metav1.ConditionFalse, Reason: why.reason, Message: why.message}},
		{name: "a failure with a new message emits a Warning",
			before:     &metav1.Condition{Type: ipamv1.IPAddressClaimReadyCondition, Status: metav1.ConditionFalse, Reason: why.reason, Message: "older"},
			wantEvents: []string{"Warning PoolExhausted MonolithIPPool ns/p has no free address"}},
		{name: "a Ready claim that fails emits a Warning",
			before:     &metav1.Condition{Type: ipamv1.IPAddressClaimReadyCondition, Status: metav1.ConditionTrue, Reason: AllocatedReason},
			wantEvents: []string{"Warning PoolExhausted MonolithIPPool ns/p has no free address"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			claim := &ipamv1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Generation: 2}}
			if tt.before != nil {
				conditions.Set(claim, *tt.before)
			}
			recorder := events.NewFakeRecorder(4)
			(&Reconciler{Recorder: recorder}).setNotReadyAndWarn(claim, why)
			close(recorder.Events)
			var got []string
			for e := range recorder.Events {
				got = append(got, e)
			}
			g.Expect(got).To(Equal(tt.wantEvents))
			c := conditions.Get(claim, ipamv1.IPAddressClaimReadyCondition)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(why.reason))
			g.Expect(c.Message).To(Equal(why.message))
			g.Expect(c.ObservedGeneration).To(Equal(int64(2)))
		})
	}
}
