package main

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	ctrl "sigs.k8s.io/controller-runtime"

	infrav1 "github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/test/bench/harness"
	"github.com/capi-monolith/capi-monolith/test/envtest"
)

// TestSmoke runs the benchmark at tiny sizes, profile included: every
// machine is provisioned by the binary and the figures come out sensible.
func TestSmoke(t *testing.T) {
	g := NewWithT(t)
	ctrl.SetLogger(envtest.TestLogger())
	cfg := DefaultConfig()
	cfg.Sizes, cfg.Runs, cfg.WarmUp = []int{3, 12}, 1, 0
	cfg.ProfileSeconds, cfg.ProfilePath = 1, filepath.Join(t.TempDir(), "cpu.pprof")
	cfg.Timeout = 3 * time.Minute
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	var log bytes.Buffer
	all, err := runAll(ctx, cfg, &log)
	t.Log(log.String())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(all.Runs).To(HaveLen(2))
	for _, r := range all.Runs {
		g.Expect(r.Took).To(BeNumerically(">", 0))
		g.Expect(r.Peak).To(BeNumerically(">", 1<<20))
		// At least the spec and status of each machine are written.
		g.Expect(r.Requests["PATCH"]).To(BeNumerically(">=", r.N))
		// kube-apiserver saw the same status patches, once the benchmark's
		// own requests are left out.
		g.Expect(r.Served).To(HaveKeyWithValue(harness.APIRequest{Verb: "PATCH", Resource: "monolithmachines/status",
			Group: infrav1.GroupVersion.Group, Code: "200"}, BeNumerically(">=", r.N)))
		g.Expect(r.Served).NotTo(HaveKey(And(HaveField("Verb", "POST"), HaveField("Resource", "monolithmachines"))),
			"the benchmark's creates are its own")
	}
	g.Expect(all.Profile).To(ContainSubstring("flat"), "pprof read the profile from the diagnostics endpoint")

	var out bytes.Buffer
	g.Expect(writeText(&out, cfg, all)).To(Succeed())
	g.Expect(out.String()).To(ContainSubstring("per machine at 12 / at 3"))
}
