package main

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/capi-monolith/capi-monolith/test/envtest"
)

// TestSmoke runs the whole benchmark at a tiny size: the binary as one and as
// three processes against loaded objects, with the figures the benchmark
// reports coming out sensible.
func TestSmoke(t *testing.T) {
	g := NewWithT(t)
	ctrl.SetLogger(envtest.TestLogger())
	cfg := DefaultConfig()
	cfg.Clusters, cfg.PerNamespace, cfg.MachinesPerCluster, cfg.Runs = 4, 2, 2, 1
	cfg.Settle, cfg.Sample, cfg.Idle, cfg.SteadyTimeout = 0, time.Second, 2*time.Second, 3*time.Minute
	cfg.HeapProfile = filepath.Join(t.TempDir(), "heap")
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	var log bytes.Buffer
	results, loaded, err := runAll(ctx, cfg, &log)
	t.Log(log.String())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(loaded.Machines).To(Equal(8), "the warm-up provisioned every machine")
	g.Expect(loaded.HeapTop).To(ContainSubstring("flat"), "pprof read the heap profile from the diagnostics endpoint")
	g.Expect(results).To(HaveLen(2))
	one, three := bySetup(results)
	g.Expect(one).To(HaveLen(1))
	g.Expect(three).To(HaveLen(1))
	g.Expect(one[0].Processes).To(HaveLen(1))
	g.Expect(three[0].Processes).To(HaveLen(3))
	for _, r := range results {
		for _, p := range r.Processes {
			g.Expect(p.RSS).To(BeNumerically(">", 1<<20), p.Modules)
			g.Expect(p.StartRSS).To(BeNumerically(">", 1<<20), p.Modules)
			g.Expect(p.Peak).To(BeNumerically(">=", p.RSS), p.Modules)
		}
	}

	// One shared cache: every resource any of the three processes watches,
	// the single process watches exactly once, and it watches fewer in all.
	a := one[0].Processes[0].Watches
	g.Expect(a).NotTo(BeEmpty())
	for _, p := range three[0].Processes {
		for res := range p.Watches {
			g.Expect(a).To(HaveKeyWithValue(res, 1.0), "watched by %s", p.Modules)
		}
	}
	g.Expect(one[0].Watches()).To(BeNumerically("<", three[0].Watches()))
	g.Expect(one[0].APIServerWatchTotal()).To(BeNumerically(">", 0), "the apiserver sees the watches")

	var out bytes.Buffer
	g.Expect(writeText(&out, cfg, results)).To(Succeed())
	g.Expect(out.String()).To(ContainSubstring("steady RSS of (a) / sum of (b)"))
}
