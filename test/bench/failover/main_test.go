package main

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// TestMeasureSmoke runs the benchmark at a tiny size, to keep it working:
// the survivor answers for every cluster and loses nothing.
func TestMeasureSmoke(t *testing.T) {
	g := NewWithT(t)
	r, err := measureFresh(context.Background(), Config{Clusters: 2, Objects: 3, Workers: 2, Timeout: time.Minute})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.Answered).To(HaveLen(2))
	g.Expect(r.Lost).To(BeZero())
	g.Expect(r.StateSecrets).To(BeNumerically(">=", 2))
	g.Expect(r.ListeningFollower).To(BeNumerically(">=", 2))
	g.Expect(Table([]Result{r}).Rows).NotTo(BeEmpty())
}
