package main

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/test/bench/harness"
	"github.com/capi-monolith/capi-monolith/test/bench/harness/clusters"
	"github.com/capi-monolith/capi-monolith/test/bench/harness/process"
	"github.com/capi-monolith/capi-monolith/test/envtest"
)

// Config is one invocation of the benchmark.
type Config struct {
	// Clusters, spread PerNamespace to a namespace, each with
	// MachinesPerCluster Machines and MonolithMachines claiming one address
	// from their namespace's pool.
	Clusters           int
	PerNamespace       int
	MachinesPerCluster int
	// Runs of each setup, alternating, after one discarded warm-up run.
	Runs int
	// Settle is waited after the processes are steady, then RSS is sampled
	// every second for Sample: the memory right after start-up.
	Settle time.Duration
	Sample time.Duration
	// Idle is from the steady state to the second sampling window, the
	// steady RSS. It must outlast Go's periodic GC (a process that allocates
	// little is collected every 2 minutes) so that the scavenger has handed
	// the start-up's garbage back to the OS; until then RSS says more about
	// the last GC's timing than about what the process keeps. 0 takes the
	// first window as the steady RSS.
	Idle time.Duration
	// SteadyTimeout bounds the wait for the processes to become steady,
	// and then for AwaitMachines.
	SteadyTimeout time.Duration
	// AwaitMachines, when set, is how many MonolithMachines must be
	// provisioned and Ready before the processes are stopped (the
	// warm-up): a steady process may still be registering nodes.
	AwaitMachines int
	// HeapProfile, when set, is where the heap profile of (a)'s process is
	// written at the end of each of its runs.
	HeapProfile string
}

// DefaultConfig is what `make bench-sharedcache` runs.
func DefaultConfig() Config {
	return Config{Clusters: 1000, PerNamespace: 10, MachinesPerCluster: 3, Runs: 3,
		Settle: 10 * time.Second, Sample: 10 * time.Second, Idle: 150 * time.Second, SteadyTimeout: 10 * time.Minute}
}

// Setup is a way of running the modules: one process per entry, each with
// the entry's modules.
type Setup struct {
	Name      string
	Processes [][]string
}

var (
	// OneProcess is the monolith: every module in one manager.
	OneProcess = Setup{Name: "one process", Processes: [][]string{{"infra", "machinepool", "ipam", "runtimeext"}}}
	// PerProvider is the same binary deployed as the three provider types
	// clusterctl installs separately.
	PerProvider = Setup{Name: "three processes", Processes: [][]string{{"infra", "machinepool"}, {"ipam"}, {"runtimeext"}}}
)

// ProcessResult is one process in its steady state.
type ProcessResult struct {
	Modules string
	// StartRSS is the mean VmRSS over the first sampling window, right
	// after the steady state; RSS over the second, after Config.Idle; Peak
	// is VmHWM or the largest VmRSS sampled, whichever is larger: the
	// kernel's RSS counters are approximate per CPU, so VmHWM can read a
	// few pages below an RSS sampled earlier.
	StartRSS, RSS, Peak uint64
	// Watches are the watch requests the process holds open, by resource
	// (its capi_monolith_api_watches_open metric).
	Watches map[string]float64
	// CPU is what the process used from its start to the end of sampling.
	CPU time.Duration
}

// Result is one run of one setup.
type Result struct {
	Setup     Setup
	Processes []ProcessResult
	// APIServerWatches is the growth of the apiserver's WATCH requests
	// while the setup ran, by resource.
	APIServerWatches map[string]float64
	// Steady is from the first start to the steady state.
	Steady time.Duration
}

// RSS is the sum of the processes' mean RSS.
func (r Result) RSS() uint64 {
	var sum uint64
	for _, p := range r.Processes {
		sum += p.RSS
	}
	return sum
}

// StartRSS is the sum of the processes' mean RSS right after start-up.
func (r Result) StartRSS() uint64 {
	var sum uint64
	for _, p := range r.Processes {
		sum += p.StartRSS
	}
	return sum
}

// Watches is the sum of the processes' open watches.
func (r Result) Watches() float64 {
	var sum float64
	for _, p := range r.Processes {
		for _, v := range p.Watches {
			sum += v
		}
	}
	return sum
}

// APIServerWatchTotal is the sum of APIServerWatches.
func (r Result) APIServerWatchTotal() float64 {
	var sum float64
	for _, v := range r.APIServerWatches {
		sum += v
	}
	return sum
}

// Load creates cfg's clusters with an unthrottled client and returns the
// number of objects made.
func Load(ctx context.Context, env *envtest.Environment, cfg Config) (int, error) {
	c, err := harness.NewClient(env.Config, env.Client.Scheme(), harness.Unthrottled)
	if err != nil {
		return 0, err
	}
	fleet, err := clusters.CreateFleet(ctx, c, clusters.FleetOptions{NamePrefix: "sharedcache-", Clusters: cfg.Clusters,
		MachinesPerCluster: cfg.MachinesPerCluster, ClustersPerNamespace: cfg.PerNamespace, Pool: true, Workers: 16})
	if err != nil {
		return 0, err
	}
	mms := fleet.MonolithMachines()
	err = harness.ForEach(ctx, len(mms), 16, func(ctx context.Context, i int) error {
		if err := c.Create(ctx, mms[i]); err != nil {
			return fmt.Errorf("failed to create MonolithMachine %s/%s: %w", mms[i].Namespace, mms[i].Name, err)
		}
		return nil
	})
	return fleet.Objects() + len(mms), err
}

// Provisioned counts the MonolithMachines that are provisioned and Ready.
func Provisioned(ctx context.Context, c client.Client) (done, total int, err error) {
	list := &infrav1.MonolithMachineList{}
	if err := c.List(ctx, list); err != nil {
		return 0, 0, fmt.Errorf("failed to list MonolithMachines: %w", err)
	}
	for i := range list.Items {
		if clusters.IsProvisioned(&list.Items[i]) {
			done++
		}
	}
	return done, len(list.Items), nil
}

// awaitProvisioned waits until want MonolithMachines are provisioned and
// Ready, at most timeout.
func awaitProvisioned(ctx context.Context, c client.Client, want int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		done, _, err := Provisioned(ctx, c)
		if err == nil && done >= want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d MonolithMachines provisioned and Ready after %s (last error: %v); not yet: %s", done, want, timeout, err, notProvisioned(ctx, c))
		}
		if err := sleep(ctx, 500*time.Millisecond); err != nil {
			return err
		}
	}
}

// Measure runs setup once: starts its processes, waits for their steady
// state, samples them, stops them.
func Measure(ctx context.Context, b *process.Bench, cfg Config, setup Setup, run string) (Result, error) {
	env := b.Env
	before, err := harness.APIServerWatches(ctx, env.Config)
	if err != nil {
		return Result{}, err
	}
	start := time.Now()
	var procs []*process.Process
	defer func() {
		for _, p := range procs {
			_ = p.Stop()
		}
	}()
	for _, mods := range setup.Processes {
		p, err := process.Start(ctx, process.Options{
			Binary: b.Binary, Config: env.Config, DiagnosticsToken: b.Token,
			Dir: filepath.Join(b.Dir, run, strings.Join(mods, "+")),
			Args: []string{"--enable-modules=" + strings.Join(mods, ","),
				// Registering an ExtensionConfig needs a Service; not measured.
				"--runtimeext-extension-config-name="},
		})
		if err != nil {
			return Result{}, err
		}
		procs = append(procs, p)
	}
	if err := process.WaitSteady(ctx, procs, cfg.SteadyTimeout); err != nil {
		return Result{}, err
	}
	if cfg.AwaitMachines > 0 {
		if err := awaitProvisioned(ctx, env.Client, cfg.AwaitMachines, cfg.SteadyTimeout); err != nil {
			return Result{}, err
		}
	}
	steadyAt := time.Now()
	res := Result{Setup: setup, Steady: steadyAt.Sub(start)}
	if err := sleep(ctx, cfg.Settle); err != nil {
		return Result{}, err
	}
	startRSS, sampledPeak, err := meanRSS(ctx, procs, cfg.Sample)
	if err != nil {
		return Result{}, err
	}
	rss := startRSS
	if cfg.Idle > 0 {
		if err := sleep(ctx, time.Until(steadyAt.Add(cfg.Idle))); err != nil {
			return Result{}, err
		}
		var idlePeak []uint64
		if rss, idlePeak, err = meanRSS(ctx, procs, cfg.Sample); err != nil {
			return Result{}, err
		}
		for i := range sampledPeak {
			sampledPeak[i] = max(sampledPeak[i], idlePeak[i])
		}
	}
	if cfg.HeapProfile != "" && setup.Name == OneProcess.Name {
		if err := procs[0].SaveProfile(ctx, "heap", cfg.HeapProfile); err != nil {
			return Result{}, err
		}
	}
	after, err := harness.APIServerWatches(ctx, env.Config)
	if err != nil {
		return Result{}, err
	}
	res.APIServerWatches = map[string]float64{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			res.APIServerWatches[k] = d
		}
	}
	for i, p := range procs {
		m, err := p.Memory()
		if err != nil {
			return Result{}, err
		}
		cpu, err := p.CPU()
		if err != nil {
			return Result{}, err
		}
		metrics, err := p.Metrics(ctx)
		if err != nil {
			return Result{}, err
		}
		res.Processes = append(res.Processes, ProcessResult{
			Modules:  strings.Join(setup.Processes[i], ","),
			StartRSS: startRSS[i], RSS: rss[i], Peak: max(m.Peak, sampledPeak[i]), CPU: cpu,
			Watches: metrics.ByLabel("capi_monolith_api_watches_open", "resource"),
		})
	}
	for _, p := range procs {
		if err := p.Stop(); err != nil {
			return Result{}, err
		}
	}
	procs = nil
	return res, nil
}

// meanRSS samples every process's VmRSS once a second for d and returns
// the means and the largest samples.
func meanRSS(ctx context.Context, procs []*process.Process, d time.Duration) (means, peaks []uint64, err error) {
	sums := make([]uint64, len(procs))
	peaks = make([]uint64, len(procs))
	samples := uint64(0)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for end := time.Now().Add(d); time.Now().Before(end); samples++ {
		for i, p := range procs {
			m, err := p.Memory()
			if err != nil {
				return nil, nil, err
			}
			sums[i] += m.Current
			peaks[i] = max(peaks[i], m.Current)
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	}
	for i := range sums {
		sums[i] /= max(samples, 1)
	}
	return sums, peaks, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// resources lists every resource any result watched, sorted.
func resources(results []Result) []string {
	set := map[string]bool{}
	for _, r := range results {
		for _, p := range r.Processes {
			for k := range p.Watches {
				set[k] = true
			}
		}
		for k := range r.APIServerWatches {
			set[k] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// notProvisioned names the MonolithMachines not provisioned and Ready, with
// their conditions, so that a failed wait says where each one stopped.
func notProvisioned(ctx context.Context, c client.Client) string {
	list := &infrav1.MonolithMachineList{}
	if err := c.List(ctx, list); err != nil {
		return fmt.Sprintf("(failed to list MonolithMachines: %v)", err)
	}
	var out []string
	for i := range list.Items {
		mm := &list.Items[i]
		if clusters.IsProvisioned(mm) {
			continue
		}
		var conds []string
		for _, cond := range mm.Status.Conditions {
			conds = append(conds, fmt.Sprintf("%s=%s %s %q", cond.Type, cond.Status, cond.Reason, cond.Message))
		}
		out = append(out, fmt.Sprintf("%s/%s [%s]", mm.Namespace, mm.Name, strings.Join(conds, "; ")))
	}
	return strings.Join(out, ", ")
}
