package main

import (
	"bytes"
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/capi-monolith/capi-monolith/test/envtest"
)

// TestSmoke runs the benchmark briefly: every machine offered is provisioned
// by the binary and the percentiles are ordered.
func TestSmoke(t *testing.T) {
	g := NewWithT(t)
	ctrl.SetLogger(envtest.TestLogger())
	cfg := DefaultConfig()
	cfg.Rate, cfg.Duration, cfg.Runs, cfg.WarmUp, cfg.QPS = 10, 2*time.Second, 1, 0, []float64{100}
	cfg.Timeout = 3 * time.Minute
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	var log bytes.Buffer
	all, err := runAll(ctx, cfg, &log)
	t.Log(log.String())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(all.Runs).To(HaveLen(1))
	r := all.Runs[0]
	g.Expect(r.N).To(Equal(20))
	g.Expect(r.P50).To(BeNumerically(">", 0))
	g.Expect(r.P50).To(BeNumerically("<=", r.P99))
	g.Expect(r.P99).To(BeNumerically("<=", r.Max))
	g.Expect(r.Offered).To(BeNumerically("~", 10, 2), "the schedule held")
	g.Expect(r.QPS).To(Equal(100.0))
	g.Expect(r.Wall).To(BeNumerically(">=", r.Max), "the run lasts at least as long as its slowest machine")
	g.Expect(r.Others).To(HaveKeyWithValue("kube-apiserver", BeNumerically(">", 0)), "the apiserver's CPU is read")

	var out bytes.Buffer
	g.Expect(Table(cfg, all.Runs).WriteText(&out)).To(Succeed())
	g.Expect(out.String()).To(ContainSubstring("--kube-api-qps=100"))
}

func TestPercentileIsNearestRank(t *testing.T) {
	g := NewWithT(t)
	v := make([]time.Duration, 100)
	for i := range v {
		v[i] = time.Duration(i+1) * time.Millisecond
	}
	g.Expect(percentile(v, 0.50)).To(Equal(50 * time.Millisecond))
	g.Expect(percentile(v, 0.99)).To(Equal(99 * time.Millisecond))
	g.Expect(percentile(v[:1], 0.99)).To(Equal(time.Millisecond))
}
