package pool

import (
	"testing"

	. "github.com/onsi/gomega"
)

func TestReplicasBeyondWhatAPoolCanReportAreCapped(t *testing.T) {
	for _, tt := range []struct {
		name       string
		replicas   int
		want       int
		wantCapped bool
	}{
		{name: "a usual count is kept", replicas: 3, want: 3},
		{name: "exactly status.instances' MaxItems is kept", replicas: MaxInstances, want: MaxInstances},
		{name: "more than status.instances' MaxItems is capped", replicas: 1 << 30, want: MaxInstances, wantCapped: true},
		{name: "a negative count is none", replicas: -1, want: 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got, capped := boundedReplicas(tt.replicas)
			g.Expect(got).To(Equal(tt.want))
			g.Expect(capped).To(Equal(tt.wantCapped))
		})
	}
}

func TestAScaleUpIsCreatedInBoundedSteps(t *testing.T) {
	g := NewWithT(t)
	n, more := createsNow(3)
	g.Expect(n).To(Equal(3))
	g.Expect(more).To(BeFalse())
	n, more = createsNow(MaxInstances)
	g.Expect(n).To(Equal(MaxCreatesPerReconcile))
	g.Expect(more).To(BeTrue(), "the rest comes in the next reconciles")
}
