package capie2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	"github.com/onsi/ginkgo/v2/types"
	. "github.com/onsi/gomega"

	capie2e "sigs.k8s.io/cluster-api/test/e2e"
)

// benchLabel marks specs that measure rather than check: only `make
// bench-capi-scale` selects them, and test-capi-e2e's default filter leaves
// them out, so that neither make test nor the conformance run pays for them.
const benchLabel = "bench"

// The benchmark reads its size from the same environment variables Cluster
// API's ScaleSpec reads (E2EConfig.GetVariableOrEmpty looks at the process
// environment first), so that the figures it writes name the size that ran.
const (
	scaleClusterCountEnv = "CAPI_SCALE_CLUSTER_COUNT"
	scaleConcurrencyEnv  = "CAPI_SCALE_CONCURRENCY"
	// benchScaleResultsEnv is the Markdown file the figures go to.
	benchScaleResultsEnv = "CAPI_SCALE_RESULTS"
	// benchScaleSkipUpgradeEnv leaves out ScaleSpec's upgrade phase.
	benchScaleSkipUpgradeEnv = "CAPI_SCALE_SKIP_UPGRADE"
	// benchScaleCommandEnv and benchScaleCommitEnv are what the results
	// file says was run, and at which commit.
	benchScaleCommandEnv = "CAPI_SCALE_COMMAND"
	benchScaleCommitEnv  = "CAPI_SCALE_COMMIT"
)

// loadSampleInterval is how often the machine's load is read while the spec
// runs; the machine is shared, so the load is part of every figure.
const loadSampleInterval = 10 * time.Second

// Cluster API's ScaleSpec at the size the environment gives (make
// bench-capi-scale CLUSTERS=… CONCURRENCY=…), each cluster the shape of
// the workload benchmarks: KCP 1 + one MachineDeployment of 3.
var _ = Describe("Cluster API scale benchmark (topology flavor)", Label(benchLabel), func() {
	var (
		load    *loadSampler
		devRSS  map[string]int64
		started time.Time
	)
	BeforeEach(func() {
		started = time.Now()
		load = startLoadSampler(loadSampleInterval)
	})
	// ReportAfterEach runs after the spec's own AfterEach (namespace
	// cleanup) and sees every By the spec made, with its time.
	ReportAfterEach(func(r SpecReport) {
		// Ginkgo calls report nodes for the specs its label filter left out
		// too (make test's short set leaves this one out): those measured
		// nothing and started no sampler.
		if r.State.Is(types.SpecStateSkipped|types.SpecStatePending) || load == nil {
			return
		}
		samples := load.stop()
		load = nil
		if dev != nil {
			devRSS = peakRSSOfTree(dev.cmd.Process.Pid)
		}
		md := renderScaleBench(r, started, samples, devRSS)
		GinkgoWriter.Println(md)
		if path := os.Getenv(benchScaleResultsEnv); path != "" {
			Expect(os.MkdirAll(filepath.Dir(path), 0o750)).To(Succeed())
			Expect(os.WriteFile(path, []byte(md), 0o600)).To(Succeed())
		}
	})

	capie2e.ScaleSpec(ctx, func() capie2e.ScaleSpecInput {
		in := scaleInput()
		in.SkipUpgrade = os.Getenv(benchScaleSkipUpgradeEnv) == "true"
		return in
	})
})

// loadSampler reads the 1-minute load average until stopped.
type loadSampler struct {
	done    chan struct{}
	wg      sync.WaitGroup
	mu      sync.Mutex
	samples []float64
}

func startLoadSampler(every time.Duration) *loadSampler {
	s := &loadSampler{done: make(chan struct{})}
	s.sample()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-s.done:
				return
			case <-t.C:
				s.sample()
			}
		}
	}()
	return s
}

func (s *loadSampler) sample() {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return
	}
	fields := strings.Fields(string(b))
	if len(fields) == 0 {
		return
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return
	}
	s.mu.Lock()
	s.samples = append(s.samples, v)
	s.mu.Unlock()
}

func (s *loadSampler) stop() []float64 {
	s.sample()
	close(s.done)
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]float64(nil), s.samples...)
}

// peakRSSOfTree is VmHWM (the peak resident set over the process's life) of
// pid and every descendant, keyed "name (pid)", in KiB. dev's etcd,
// kube-apiserver and Cluster API managers are its children.
func peakRSSOfTree(pid int) map[string]int64 {
	out := map[string]int64{}
	var walk func(int)
	walk = func(p int) {
		name, hwm, ok := readHWM(p)
		if ok {
			out[fmt.Sprintf("%s (%d)", name, p)] = hwm
		}
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", p))
		for _, t := range tasks {
			b, err := os.ReadFile(t)
			if err != nil {
				continue
			}
			for _, c := range strings.Fields(string(b)) {
				if cp, err := strconv.Atoi(c); err == nil {
					walk(cp)
				}
			}
		}
	}
	walk(pid)
	return out
}

func readHWM(pid int) (string, int64, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "", 0, false
	}
	var name string
	var hwm int64 = -1
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch k {
		case "Name":
			name = strings.TrimSpace(v)
		case "VmHWM":
			f := strings.Fields(v)
			if len(f) > 0 {
				hwm, _ = strconv.ParseInt(f[0], 10, 64)
			}
		}
	}
	return name, hwm, name != "" && hwm >= 0
}

// renderScaleBench writes the figures as Markdown: the wall time of each of
// ScaleSpec's phases, when each of its steps first and last started, the
// spec's total, the load, and dev's processes' peak RSS.
func renderScaleBench(r SpecReport, started time.Time, load []float64, rss map[string]int64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Cluster API ScaleSpec against capi-monolith dev, %s clusters\n\n", envOr(scaleClusterCountEnv, "10 (ScaleSpec's default)"))
	b.WriteString("Written by `make bench-capi-scale` (test/capie2e, label `bench`): do not edit, run it again.\n\n")
	fmt.Fprintf(&b, "- command: `%s`\n", envOr(benchScaleCommandEnv, "go test -tags e2e ./test/capie2e -ginkgo.label-filter=bench"))
	fmt.Fprintf(&b, "- commit: %s\n", envOr(benchScaleCommitEnv, "unknown"))
	fmt.Fprintf(&b, "- started: %s\n", started.UTC().Format(time.RFC3339))
	fmt.Fprintf(&b, "- clusters: %s, concurrency: %s, each KCP 1 + 1 MachineDeployment × 3 workers (topology flavor, ClusterClass `monolith`)\n",
		envOr(scaleClusterCountEnv, "10"), envOr(scaleConcurrencyEnv, "5"))
	upgrade := "included (ScaleSpec's default)"
	if os.Getenv(benchScaleSkipUpgradeEnv) == "true" {
		upgrade = "skipped (CAPI_SCALE_SKIP_UPGRADE=true)"
	}
	fmt.Fprintf(&b, "- upgrade phase: %s\n", upgrade)
	fmt.Fprintf(&b, "- result: **%s**", r.State)
	if r.State.Is(types.SpecStateFailureStates) {
		fmt.Fprintf(&b, " — %s (%s)", oneLine(r.FailureMessage()), r.FailureLocation())
	}
	b.WriteString("\n\n")

	var steps []types.SpecEvent
	for _, e := range r.SpecEvents {
		// ScaleSpec's own steps (scale.go) are its phases; the Bys of the
		// framework helpers its workers call, interleaved, are not.
		if e.SpecEventType == types.SpecEventByStart && filepath.Base(e.CodeLocation.FileName) == "scale.go" {
			steps = append(steps, e)
		}
	}
	writePhases(&b, r, steps)
	writeTimeline(&b, r, steps)

	if len(load) > 0 {
		lo, hi, sum := load[0], load[0], 0.0
		for _, v := range load {
			lo, hi, sum = min(lo, v), max(hi, v), sum+v
		}
		fmt.Fprintf(&b, "1-minute load average over the spec (2 cores, shared), %d samples every %s: min %.1f, mean %.1f, max %.1f\n\n",
			len(load), loadSampleInterval, lo, sum/float64(len(load)), hi)
	}

	if len(rss) > 0 {
		b.WriteString("| dev process | peak RSS (VmHWM, MiB) |\n|---|---:|\n")
		names := make([]string, 0, len(rss))
		for n := range rss {
			names = append(names, n)
		}
		slices.Sort(names)
		var total int64
		for _, n := range names {
			fmt.Fprintf(&b, "| %s | %.0f |\n", n, float64(rss[n])/1024)
			total += rss[n]
		}
		fmt.Fprintf(&b, "| sum of peaks | %.0f |\n", float64(total)/1024)
	}
	return b.String()
}

// scalePhases are the steps ScaleSpec v1.14.2 takes once, on the spec's own
// goroutine, to start each phase; its workers run the per-cluster steps of
// a phase concurrently, so a phase lasts from its step to the next phase's.
var scalePhases = []string{
	"Create workload clusters concurrently",
	"Upgrade the workload clusters concurrently",
	"Delete the workload clusters concurrently",
}

// writePhases writes the wall time of each phase that ran: from its step
// to the next phase's step, the last to the spec's end (which includes the
// namespace's deletion).
func writePhases(b *strings.Builder, r SpecReport, steps []types.SpecEvent) {
	var at []types.SpecEvent
	for _, e := range steps {
		if slices.Contains(scalePhases, e.Message) {
			at = append(at, e)
		}
	}
	b.WriteString("| phase | wall time |\n|---|---:|\n")
	for i, e := range at {
		end := r.EndTime
		if i+1 < len(at) {
			end = at[i+1].TimelineLocation.Time
		}
		fmt.Fprintf(b, "| %s | %s |\n", e.Message, end.Sub(e.TimelineLocation.Time).Round(time.Second))
	}
	fmt.Fprintf(b, "| **spec total** (It and AfterEach) | **%s** |\n\n", r.RunTime.Round(time.Second))
}

// writeTimeline writes each distinct step once, in the order it first
// started, with how many times it started and when (from the spec's start)
// it first and last did: the per-cluster steps of concurrent workers
// interleave, so the time between two of them measures nothing.
func writeTimeline(b *strings.Builder, r SpecReport, steps []types.SpecEvent) {
	type seen struct {
		n           int
		first, last time.Time
	}
	var order []string
	by := map[string]*seen{}
	for _, e := range steps {
		t := e.TimelineLocation.Time
		s, ok := by[e.Message]
		if !ok {
			s = &seen{first: t}
			by[e.Message] = s
			order = append(order, e.Message)
		}
		s.n++
		s.last = t
	}
	b.WriteString("| ScaleSpec step (its By) | times | first started at | last started at |\n|---|---:|---:|---:|\n")
	for _, m := range order {
		s := by[m]
		fmt.Fprintf(b, "| %s | %d | %s | %s |\n", m, s.n,
			s.first.Sub(r.StartTime).Round(time.Second), s.last.Sub(r.StartTime).Round(time.Second))
	}
	b.WriteString("\n")
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}
