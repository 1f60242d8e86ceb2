package capie2e

import (
	"strings"
	"testing"
	"time"

	"github.com/onsi/ginkgo/v2/types"
	. "github.com/onsi/gomega"
)

// The report of a concurrent ScaleSpec names each step once with its count
// and times, and measures phases from one phase's step to the next.
func TestScaleReportSumsConcurrentStepsAndTimesPhases(t *testing.T) {
	g := NewWithT(t)
	start := time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
	by := func(at time.Duration, msg string) types.SpecEvent {
		return types.SpecEvent{
			SpecEventType:    types.SpecEventByStart,
			Message:          msg,
			CodeLocation:     types.CodeLocation{FileName: "/mod/test/e2e/scale.go"},
			TimelineLocation: types.TimelineLocation{Time: start.Add(at)},
		}
	}
	r := types.SpecReport{
		State: types.SpecStatePassed, StartTime: start, EndTime: start.Add(10 * time.Minute), RunTime: 10 * time.Minute,
		SpecEvents: types.SpecEvents{
			by(0, "Create the ClusterClass to be used by all workload clusters"),
			by(time.Second, "Create workload clusters concurrently"),
			by(2*time.Second, "Waiting for the control plane to be ready"),
			by(3*time.Second, "Waiting for the control plane to be ready"),
			// A framework helper's By is not ScaleSpec's step.
			{SpecEventType: types.SpecEventByStart, Message: "Waiting for the workload nodes to exist",
				CodeLocation: types.CodeLocation{FileName: "/mod/test/framework/machines.go"}, TimelineLocation: types.TimelineLocation{Time: start.Add(4 * time.Second)}},
			by(90*time.Second, "Waiting for the control plane to be ready"),
			by(4*time.Minute+1*time.Second, "Upgrade the workload clusters concurrently"),
			by(8*time.Minute+1*time.Second, "Delete the workload clusters concurrently"),
		},
	}
	md := renderScaleBench(r, start, []float64{1, 3}, map[string]int64{"manager (1)": 2048})
	g.Expect(md).To(ContainSubstring("| Create workload clusters concurrently | 4m0s |\n"))
	g.Expect(md).To(ContainSubstring("| Upgrade the workload clusters concurrently | 4m0s |\n"))
	g.Expect(md).To(ContainSubstring("| Delete the workload clusters concurrently | 1m59s |\n"))
	g.Expect(md).To(ContainSubstring("| Waiting for the control plane to be ready | 3 | 2s | 1m30s |\n"))
	g.Expect(md).NotTo(ContainSubstring("Waiting for the workload nodes to exist"))
	g.Expect(strings.Count(md, "Waiting for the control plane to be ready")).To(Equal(1))
	g.Expect(md).To(ContainSubstring("min 1.0, mean 2.0, max 3.0"))
	g.Expect(md).To(ContainSubstring("| manager (1) | 2 |"))
}
