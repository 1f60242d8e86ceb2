package scaffold_test

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/capi-monolith/capi-monolith/contracts/scaffold"
)

func TestSetProgressCondition(t *testing.T) {
	tests := []struct {
		name        string
		in          *scaffold.Progress
		wantStatus  metav1.ConditionStatus
		wantReason  string
		wantMessage string
	}{
		{name: "a step not reached leaves the condition unset"},
		{name: "a done step is True with the done reason and no message", in: &scaffold.Progress{Done: true, Reason: "Ignored", Message: "ignored"},
			wantStatus: metav1.ConditionTrue, wantReason: "Done"},
		{name: "a step not done is False with its reason and message", in: scaffold.NotDone("Waiting", "for something"),
			wantStatus: metav1.ConditionFalse, wantReason: "Waiting", wantMessage: "for something"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			obj := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Generation: 7}}
			scaffold.SetProgressCondition(obj, "Step", "Done", tt.in)
			got := conditions.Get(obj, "Step")
			if tt.in == nil {
				g.Expect(got).To(BeNil())
				return
			}
			g.Expect(got).NotTo(BeNil())
			g.Expect(got.Status).To(Equal(tt.wantStatus))
			g.Expect(got.Reason).To(Equal(tt.wantReason))
			g.Expect(got.Message).To(Equal(tt.wantMessage))
			g.Expect(got.ObservedGeneration).To(Equal(int64(7)))
		})
	}
}
