// Command workload is the workload cluster benchmark (`make bench-workload`).
// It starts the real `capi-monolith dev` (etcd, kube-apiserver, Cluster API
// v1.14.2's core, kubeadm bootstrap and kubeadm control plane managers, and
// this binary's modules), as a user starts it, and creates N workload
// clusters at once (-clusters, default 100), each a KubeadmControlPlane of
// one machine and a MachineDeployment of 3 workers with a
// KubeadmConfigTemplate on the inMemory backend (1 s simulated provisioning
// and bootstrap), through a client without client-side rate limit. It
// measures
//
//   - the time from the first create until every Machine is Running with a
//     nodeRef and every KubeadmControlPlane Available,
//   - the peak resident memory (VmHWM) of the capi-monolith process, which
//     serves every workload cluster's API, and its steady RSS before and
//     after, hence the memory per workload cluster,
//   - the same for the three Cluster API managers, kube-apiserver and etcd,
//     reported apart, and the CPU each used while the clusters came up,
//   - with -addon-objects N (default 200; dev then runs with --data-dir):
//     the memory and journal bytes N more objects per cluster cost, and,
//     after dev is stopped with Ctrl-C and started again on the same state
//     folder, the time until every cluster serves its objects again.
//
// It prints the figures and writes them to test/bench/results/workload.md
// (-out). One run per invocation: a dev of hundreds of clusters takes many
// minutes on this machine, and -clusters 500 is the larger size. A size that
// does not fit in the machine's memory ends when MemAvailable falls below
// -min-available (2Gi), with the figures reached by then.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"k8s.io/apimachinery/pkg/api/resource"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/capi-monolith/capi-monolith/test/bench/harness"
	"github.com/capi-monolith/capi-monolith/test/bench/harness/process"
	"github.com/capi-monolith/capi-monolith/test/bench/harness/report"
	"github.com/capi-monolith/capi-monolith/test/envtest"
)

// defaultOut is the results file, relative to the repository root.
const defaultOut = "test/bench/results/workload.md"

// defaultSBSOut is -sbs's results file.
const defaultSBSOut = "test/bench/results/workload-sbs.md"

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "bench-workload:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	cfg := DefaultConfig()
	fs := flag.NewFlagSet("bench-workload", flag.ContinueOnError)
	fs.IntVar(&cfg.Clusters, "clusters", cfg.Clusters, "workload clusters created at once (the issue's second size is 500)")
	fs.IntVar(&cfg.Workers, "workers", cfg.Workers, "MachineDeployment replicas per cluster (the control plane is one machine)")
	fs.DurationVar(&cfg.ProvisioningDelay, "provisioning-delay", cfg.ProvisioningDelay, "the inMemory backend's simulated provisioning per machine")
	fs.DurationVar(&cfg.BootstrapDelay, "bootstrap-delay", cfg.BootstrapDelay, "the inMemory backend's simulated bootstrap per machine")
	fs.IntVar(&cfg.Concurrency, "concurrency", cfg.Concurrency, "goroutines creating the clusters")
	fs.DurationVar(&cfg.Poll, "poll", cfg.Poll, "how often Machines and control planes are listed while waiting")
	fs.DurationVar(&cfg.Settle, "settle", cfg.Settle, "wait before each steady RSS reading")
	fs.DurationVar(&cfg.Window, "window", cfg.Window, "how long VmRSS is read (once a second) for each steady reading")
	fs.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "bound on the wait for every machine")
	fs.Func("min-available", "end the run, reporting what it reached, when the machine's MemAvailable falls below this (a Kubernetes quantity, e.g. 2Gi; 0 never)", func(v string) error {
		q, err := resource.ParseQuantity(v)
		if err != nil || q.Sign() < 0 {
			return fmt.Errorf("want a non-negative quantity such as 2Gi, got %q", v)
		}
		cfg.MinAvailable = uint64(q.Value())
		return nil
	})
	fs.IntVar(&cfg.AddonObjects, "addon-objects", cfg.AddonObjects, "objects written into every workload cluster once all run, before dev is restarted on its --data-dir to time every cluster served again (0 skips that phase and runs dev without --data-dir)")
	binary := fs.String("binary", "", "the capi-monolith binary to run (default: built from this tree)")
	devArgs := fs.String("dev-args", "", "space-separated flags added to `capi-monolith dev`")
	out := fs.String("out", defaultOut, "Markdown results file; empty writes none")
	sbs := fs.Bool("sbs", false, "side by side (make bench-workload-sbs): alternate runs of our infra module and of Cluster API's in-memory provider ("+peerPackage+"@"+peerVersion+", built in a scratch folder from test/capie2e's pins), same dev, same clusters; -addon-objects and -heap-profile do not apply")
	rounds := fs.Int("rounds", 1, "with -sbs: runs of each side, alternating")
	peerBinary := fs.String("peer-binary", "", "with -sbs: the peer's binary to run instead of the one built")
	fs.StringVar(&cfg.CPUProfiling.Dir, "cpu-profile-dir", "", "record CPU profiles of the provider and of kube-apiserver from the first create until every machine runs (windows of -cpu-profile-window, merged per process) into this folder, and report where each spent its time (with -sbs: a folder per run)")
	fs.DurationVar(&cfg.CPUProfiling.Window, "cpu-profile-window", defaultProfileWindow, "length of one CPU profile request (under kube-apiserver's 60 s request timeout)")
	heapProfile := fs.String("heap-profile", "", "write the capi-monolith process's heap profile to this file once every machine runs (dev then serves its secure diagnostics endpoint on a free loopback port), and report where its heap in use went")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if cfg.Clusters < 1 || cfg.Workers < 0 || cfg.Concurrency < 1 || cfg.Poll <= 0 || cfg.AddonObjects < 0 {
		return errors.New("-clusters, -concurrency and -poll must be positive, -workers and -addon-objects not negative")
	}
	cfg.DevArgs = strings.Fields(*devArgs)
	ctrl.SetLogger(envtest.TestLogger())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	machine := harness.DescribeMachine(ctx)
	if *sbs {
		if *rounds < 1 {
			return errors.New("-rounds must be positive")
		}
		if *out == defaultOut {
			*out = defaultSBSOut
		}
		s, err := runSideBySide(ctx, cfg, *binary, *peerBinary, *rounds, os.Stderr)
		if s != nil && len(s.Runs) > 0 {
			if werr := s.writeText(os.Stdout); werr != nil {
				return errors.Join(err, werr)
			}
			if *out != "" {
				if werr := report.WriteFile(*out, func(w io.Writer) error { return s.writeMarkdown(w, cfg, machine) }); werr != nil {
					return errors.Join(err, werr)
				}
			}
		}
		return err
	}
	r, err := runOnce(ctx, cfg, *binary, *heapProfile, os.Stderr)
	if err != nil {
		return err
	}
	if err := writeText(os.Stdout, cfg, r); err != nil {
		return err
	}
	if *out == "" {
		return nil
	}
	return report.WriteFile(*out, func(w io.Writer) error { return writeMarkdown(w, cfg, machine, r) })
}

// Run is one invocation's result with the conditions it ran under.
type Run struct {
	Result
	// LoadBefore and LoadAfter are the load averages when dev was ready
	// and when every machine ran.
	LoadBefore, LoadAfter string
	// State is the persistence phase's figures (-addon-objects > 0).
	State *StateResult
	// HeapTop is where capi-monolith's heap in use went once every machine
	// ran (-heap-profile), and Runtime the Go runtime's memory figures
	// before the clusters and then.
	HeapTop string
	Runtime *[2]runtimeMemory
}

// runOnce builds the binary unless given, starts dev, measures and stops
// dev; with heapProfile, it also saves the binary's heap profile there.
func runOnce(ctx context.Context, cfg Config, binary, heapProfile string, log io.Writer) (Run, error) {
	var run Run
	dir, err := os.MkdirTemp("", "capi-monolith-bench-workload-")
	if err != nil {
		return run, fmt.Errorf("failed to create a folder for dev: %w", err)
	}
	defer os.RemoveAll(dir)
	if binary == "" {
		fmt.Fprintln(log, "building capi-monolith")
		if binary, err = process.Build(ctx, dir); err != nil {
			return run, err
		}
	}
	// Dev serves its diagnostics endpoint only when a profile is read.
	devArgs := slices.Clone(cfg.DevArgs)
	var diagnostics process.Diagnostics
	profiling := heapProfile != "" || cfg.CPUProfiling.Dir != ""
	if profiling {
		var args []string
		if diagnostics, args, err = devDiagnostics(); err != nil {
			return run, err
		}
		devArgs = append(devArgs, args...)
	}
	stateDir := filepath.Join(dir, "state")
	if cfg.AddonObjects > 0 {
		devArgs = append(slices.Clone(devArgs), "--data-dir="+stateDir)
	}
	start := func(ctx context.Context) (*Dev, error) { return StartDev(ctx, binary, dir, devArgs) }
	fmt.Fprintf(log, "starting %s dev\n", binary)
	dev, err := start(ctx)
	if err != nil {
		return run, err
	}
	run.LoadBefore = harness.LoadAverage()
	var profiler *heapProfiler
	if profiling {
		if err := grantDiagnostics(ctx, dev, &diagnostics); err != nil {
			return run, errors.Join(err, dev.Stop())
		}
		cfg.CPUProfiling.Provider = diagnostics
	}
	if heapProfile != "" {
		profiler = &heapProfiler{path: heapProfile, diagnostics: diagnostics}
		if err := profiler.begin(ctx); err != nil {
			return run, errors.Join(err, dev.Stop())
		}
	}
	fmt.Fprintf(log, "dev ready (load %s); %d clusters x (1 control plane + %d workers)\n", run.LoadBefore, cfg.Clusters, cfg.Workers)
	run.Result, err = Measure(ctx, dev, cfg, log)
	run.LoadAfter = harness.LoadAverage()
	if err == nil && profiler != nil {
		var after runtimeMemory
		if run.HeapTop, after, err = profiler.save(ctx, binary); err == nil {
			run.Runtime = &[2]runtimeMemory{profiler.before, after}
			fmt.Fprintf(log, "  heap profile written to %s; heap in use:\n%s\n", heapProfile, run.HeapTop)
		}
	}
	if err == nil && cfg.AddonObjects > 0 && run.Incomplete == "" && !run.OutOfMemory {
		var s StateResult
		s, dev, err = measureState(ctx, dev, start, cfg, run.Result, filepath.Join(stateDir, "modules", "infra"), log)
		run.State = &s
		if dev == nil {
			return run, err
		}
	}
	fmt.Fprintln(log, "stopping dev")
	if stopErr := dev.Stop(); stopErr != nil {
		// The figures stand; a slow stop is worth knowing about.
		fmt.Fprintf(log, "stopping dev: %v\n", stopErr)
	}
	return run, err
}
