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

// TestSmoke runs the benchmark at two clusters: dev starts, every Machine
// of both clusters becomes Running with a nodeRef, both control planes
// Available, and the figures come out sensible; 20 objects go into each
// cluster and both are served again after dev restarts on its --data-dir;
// the binary's heap profile is read from dev's secure diagnostics endpoint,
// and CPU profiles of it and of kube-apiserver are recorded while the
// clusters come up.
func TestSmoke(t *testing.T) {
	g := NewWithT(t)
	ctrl.SetLogger(envtest.TestLogger())
	cfg := DefaultConfig()
	cfg.Clusters, cfg.Workers = 2, 1
	cfg.Settle, cfg.Window = time.Second, 2*time.Second
	cfg.Timeout = 4 * time.Minute
	cfg.AddonObjects = 20
	cfg.CPUProfiling = CPUProfiling{Dir: t.TempDir(), Window: 2 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	var log bytes.Buffer
	heap := filepath.Join(t.TempDir(), "heap")
	r, err := runOnce(ctx, cfg, "", heap, &log)
	t.Log(log.String())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.Machines).To(Equal(4))
	g.Expect(r.Running).To(HaveLen(4))
	g.Expect(r.Endpoints).To(Equal(2), "one workload API listener per cluster")
	g.Expect(r.MachinesRunning).To(BeNumerically(">", 0))
	for _, p := range Parts {
		g.Expect(r.End[p].Memory.Peak).To(BeNumerically(">", 1<<20), string(p))
		g.Expect(r.After[p]).To(BeNumerically(">", 1<<20), string(p))
	}

	g.Expect(r.HeapTop).To(ContainSubstring("flat"), "pprof read the heap profile from dev's diagnostics endpoint")
	g.Expect(r.Runtime).NotTo(BeNil())
	g.Expect(r.Runtime[1].Goroutines).To(BeNumerically(">", r.Runtime[0].Goroutines), "each cluster serves its workload API on goroutines of its own")
	g.Expect(r.Runtime[1].Stacks).To(BeNumerically(">", 0))
	g.Expect(heap).To(BeARegularFile())

	g.Expect(r.CPUProfiles).To(HaveLen(2), "the provider's and kube-apiserver's")
	for i, name := range []string{"provider", "kube-apiserver"} {
		p := r.CPUProfiles[i]
		g.Expect(p.Process).To(Equal(name))
		g.Expect(p.Flat).To(ContainSubstring("Type: cpu"))
		g.Expect(p.Windows).To(BeNumerically(">=", 1))
		g.Expect(p.Path).To(BeARegularFile())
		g.Expect(p.Flat).To(ContainSubstring("flat%"), "pprof read the merged profile")
		g.Expect(p.Cum).To(ContainSubstring("cum%"))
	}
	g.Expect(r.CPUProfiles[0].Flat).To(ContainSubstring("File: capi-monolith"), "the provider is dev's capi-monolith")
	g.Expect(r.CPUProfiles[1].Flat).To(ContainSubstring("File: kube-apiserver"))

	g.Expect(r.State).NotTo(BeNil(), "the persistence phase ran")
	g.Expect(r.State.ServedAgain).To(HaveLen(2), "both clusters served again after the restart")
	g.Expect(r.State.JournalAfter).To(BeNumerically(">", r.State.JournalBefore), "the addon objects are in the journals")
	g.Expect(r.State.DevReady).To(BeNumerically(">", 0))

	var out bytes.Buffer
	g.Expect(writeText(&out, cfg, r)).To(Succeed())
	g.Expect(out.String()).To(ContainSubstring("every Machine Running with a nodeRef"))
	g.Expect(out.String()).To(ContainSubstring("every cluster served again"))
	g.Expect(out.String()).To(ContainSubstring("kube-apiserver: "), "where each process spent its CPU")
}
