package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/capi-monolith/capi-monolith/ipam/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/test/bench/harness"

	"github.com/capi-monolith/capi-monolith/test/envtest"
)

var env *envtest.Environment

func TestMain(m *testing.M) {
	ctrl.SetLogger(envtest.TestLogger())
	var err error
	env, err = startEnvironment(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.Exit(code)
}

// TestSmallBenchmarkFulfilsEveryClaimWithDistinctAddresses runs the whole
// benchmark at a tiny size: it checks the harness, not the figures.
func TestSmallBenchmarkFulfilsEveryClaimWithDistinctAddresses(t *testing.T) {
	g := NewWithT(t)
	cfg := DefaultConfig()
	cfg.Sizes, cfg.Runs, cfg.RawObjects, cfg.Warmup, cfg.Window = []int{50}, 1, 50, 0, 20
	cfg.RunTimeout = 45 * time.Second

	res, err := Measure(t.Context(), env, cfg)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Problems()).To(BeEmpty())
	g.Expect(res.Runs).To(HaveLen(1))
	run := res.Runs[0]
	g.Expect(run.N).To(Equal(50))
	g.Expect(run.Fulfilled).To(Equal(50))
	g.Expect(run.Addresses).To(Equal(50))
	g.Expect(run.Distinct).To(Equal(50))
	g.Expect(run.PoolUsed).To(BeEquivalentTo(50))
	g.Expect(run.RawRate).To(BeNumerically(">", 0))
	g.Expect(run.CreateRate).To(BeNumerically(">", 0))
	g.Expect(run.FulfilRate).To(BeNumerically(">", 0))
	g.Expect(run.FirstWindow).To(BeNumerically(">", 0))
	g.Expect(run.LastWindow).To(BeNumerically(">", 0))
	g.Expect(run.PeakRSS).To(BeNumerically(">", 0))
	g.Expect(run.ControlPlaneRSS).To(HaveKey("kube-apiserver"))

	profile := filepath.Join(t.TempDir(), "heap.pprof")
	g.Expect(harness.SaveAPIServerProfile(t.Context(), env.Config, "heap", profile)).To(Succeed())
	g.Expect(profile).To(BeAnExistingFile())

	// Cleanup leaves nothing behind for the next run.
	for _, list := range []client.ObjectList{&ipamv1.IPAddressClaimList{}, &ipamv1.IPAddressList{}, &v1alpha1.MonolithIPPoolList{}} {
		g.Expect(env.Client.List(t.Context(), list)).To(Succeed())
		g.Expect(meta.LenList(list)).To(BeZero(), "%T", list)
	}

	var md strings.Builder
	g.Expect(res.WriteMarkdown(&md, "go test")).To(Succeed())
	g.Expect(md.String()).To(ContainSubstring("| 50 | 1 |"))
	g.Expect(md.String()).To(ContainSubstring(cfg.Rate.String()))
	var text strings.Builder
	g.Expect(res.WriteText(&text)).To(Succeed())
	g.Expect(text.String()).To(ContainSubstring("yes, every run"))
}

func TestSizesFlagTakesACommaSeparatedList(t *testing.T) {
	g := NewWithT(t)
	o, err := parseFlags([]string{"-n", "1000, 10000", "-runs", "2", "-qps", "50", "-burst", "80"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.cfg.Sizes).To(Equal([]int{1000, 10000}))
	g.Expect(o.cfg.Runs).To(Equal(2))
	g.Expect(o.cfg.Rate.String()).To(Equal("qps=50 burst=80"))
}

func TestFlagsRejectSettingsThatCannotGiveFigures(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"a size that is not a number", []string{"-n", "ten"}},
		{"more claims than a /16 holds", []string{"-n", "70000"}},
		{"an unthrottled module", []string{"-qps", "-1"}},
		{"no runs", []string{"-runs", "0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseFlags(tc.args)
			NewWithT(t).Expect(err).To(HaveOccurred())
		})
	}
}
