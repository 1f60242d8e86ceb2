package scaffold_test

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/capi-monolith/capi-monolith/contracts/scaffold"
)

func TestReasonOfTheFirstIssue(t *testing.T) {
	cond := func(t string, s metav1.ConditionStatus, reason string) metav1.Condition {
		return metav1.Condition{Type: t, Status: s, Reason: reason, Message: reason + " says so"}
	}
	tests := []struct {
		name       string
		in         []metav1.Condition
		wantStatus metav1.ConditionStatus
		wantReason string
	}{
		{name: "the first issue in the summary's order gives its reason, whatever the order set",
			in:         []metav1.Condition{cond("B", metav1.ConditionFalse, "Later"), cond("A", metav1.ConditionFalse, "PoolExhausted")},
			wantStatus: metav1.ConditionFalse, wantReason: "PoolExhausted"},
		{name: "an issue wins over an earlier Unknown",
			in:         []metav1.Condition{cond("A", metav1.ConditionUnknown, "NotSure"), cond("B", metav1.ConditionFalse, "InvalidConfiguration")},
			wantStatus: metav1.ConditionFalse, wantReason: "InvalidConfiguration"},
		{name: "without issues the first Unknown gives its reason",
			in:         []metav1.Condition{cond("A", metav1.ConditionTrue, "Fine"), cond("B", metav1.ConditionUnknown, "NotSure")},
			wantStatus: metav1.ConditionUnknown, wantReason: "NotSure"},
		{name: "all fine is Ready",
			in:         []metav1.Condition{cond("A", metav1.ConditionTrue, "Fine"), cond("B", metav1.ConditionTrue, "Done")},
			wantStatus: metav1.ConditionTrue, wantReason: scaffold.ReadyReason},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			obj := &clusterv1.Cluster{}
			for _, c := range tt.in {
				conditions.Set(obj, c)
			}
			g.Expect(conditions.SetSummaryCondition(obj, obj, clusterv1.ReadyCondition,
				conditions.ForConditionTypes{"A", "B"}, scaffold.ReasonOfTheFirstIssue)).To(Succeed())
			got := conditions.Get(obj, clusterv1.ReadyCondition)
			g.Expect(got.Status).To(Equal(tt.wantStatus))
			g.Expect(got.Reason).To(Equal(tt.wantReason))
			if tt.wantStatus == metav1.ConditionFalse {
				g.Expect(got.Message).To(ContainSubstring(tt.wantReason+" says so"), "the message is the default summary's")
			}
		})
	}
}
