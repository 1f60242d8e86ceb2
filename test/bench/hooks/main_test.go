package main

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// TestMeasureSmoke runs the benchmark at a tiny size, to keep it working.
func TestMeasureSmoke(t *testing.T) {
	g := NewWithT(t)
	r, err := Measure(context.Background(), Config{Rate: 50, Duration: 500 * time.Millisecond, MachineDeployments: 3, PatchCalls: 5, Runs: 1})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.Lifecycle.Calls).To(Equal(25))
	g.Expect(r.Patches.Calls).To(Equal(5))
	g.Expect(r.PatchRequestBytes).To(BeNumerically(">", 0))
	g.Expect(Table(Config{Rate: 50, MachineDeployments: 3}, []Result{r}).Rows).NotTo(BeEmpty())
}
