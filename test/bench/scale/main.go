// Command scale is the infrastructure scale benchmark (`make bench-scale`).
// For each size N (-n, default 100, 1,000 and 5,000) it creates, against one
// envtest apiserver, N/10 clusters with 10 Machines each (as Cluster API core
// would), starts the capi-monolith binary with `--enable-modules=infra` as a
// fresh process, creates the N inMemory MonolithMachines at once (16
// goroutines, unthrottled client) and measures
//
//   - the time from the first create until a watch has seen every machine
//     provisioned (status.initialization.provisioned and Ready=True),
//   - the process's peak resident memory (VmHWM) and CPU time, and the API
//     requests it made (its rest_client_requests_total), broken down by
//     verb, resource and code from kube-apiserver's apiserver_request_total
//     less the benchmark's own requests,
//   - the cost per machine of each, whose growth from 1,000 to 5,000 must
//     stay within 1.2× (5,000 machines ≤ 1.2 × 5 × the 1,000 figure).
//
// During the first run of the largest size it takes a CPU profile from the
// process's diagnostics endpoint (/debug/pprof/profile) and reports where the
// time went. Each size gets -runs runs (median and spread) after a discarded
// warm-up run; every run's objects are deleted through the provider before
// the next.
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
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"

	infrav1 "github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/test/bench/harness"
	"github.com/capi-monolith/capi-monolith/test/bench/harness/process"
	"github.com/capi-monolith/capi-monolith/test/bench/harness/report"
	"github.com/capi-monolith/capi-monolith/test/envtest"
)

// defaultOut is the results file, relative to the repository root.
const defaultOut = "test/bench/results/scale.md"

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "bench-scale:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	cfg := DefaultConfig()
	fs := flag.NewFlagSet("bench-scale", flag.ContinueOnError)
	fs.Var((*harness.Ints)(&cfg.Sizes), "n", "comma-separated machine counts")
	fs.IntVar(&cfg.Runs, "runs", cfg.Runs, "runs per size; the median is reported")
	fs.IntVar(&cfg.WarmUp, "warmup", cfg.WarmUp, "machines in the discarded warm-up run; 0 skips it")
	fs.IntVar(&cfg.MachinesPerCluster, "machines-per-cluster", cfg.MachinesPerCluster, "Machines per cluster")
	fs.IntVar(&cfg.ClustersPerNamespace, "clusters-per-namespace", cfg.ClustersPerNamespace, "clusters per namespace")
	fs.Float64Var(&cfg.QPS, "qps", cfg.QPS, "the process's --kube-api-qps (burst twice that)")
	fs.IntVar(&cfg.ProfileSeconds, "profile-seconds", cfg.ProfileSeconds, "CPU profile length in the first run of the largest size; 0 takes none")
	fs.StringVar(&cfg.ProfilePath, "profile", filepath.Join(os.TempDir(), "capi-monolith-scale.pprof"), "where the CPU profile is written")
	out := fs.String("out", defaultOut, "Markdown results file; empty writes none")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if cfg.Runs < 1 || cfg.MachinesPerCluster < 1 || cfg.ClustersPerNamespace < 1 || cfg.QPS <= 0 || len(cfg.Sizes) == 0 {
		return errors.New("-n, -runs, -machines-per-cluster, -clusters-per-namespace and -qps must be positive")
	}
	ctrl.SetLogger(envtest.TestLogger())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	machine := harness.DescribeMachine(ctx)
	all, err := runAll(ctx, cfg, os.Stderr)
	if err != nil {
		return err
	}
	if err := writeText(os.Stdout, cfg, all); err != nil {
		return err
	}
	if *out == "" {
		return nil
	}
	return report.WriteFile(*out, func(w io.Writer) error { return writeMarkdown(w, cfg, machine, all) })
}

// Results are everything runAll measured.
type Results struct {
	Runs []Result
	// WarmUp is the discarded run, if any.
	WarmUp *Result
	// Loads are the load averages at the start of each measured run.
	Loads []string
	// Profile is `go tool pprof -top` of the profile, if one was taken.
	Profile string
}

// runAll starts the apiserver and measures every size; progress goes to log.
func runAll(ctx context.Context, cfg Config, log io.Writer) (Results, error) {
	var all Results
	b, err := process.NewBench(ctx, log, harness.EnvOptions{
		AddToScheme: []func(*runtime.Scheme) error{infrav1.AddToScheme},
		CRDDirs:     []string{"manifests/infra/crd"},
	})
	if err != nil {
		return all, err
	}
	defer b.Close() //nolint:errcheck // nothing to do about it after the figures
	if cfg.WarmUp > 0 {
		fmt.Fprintf(log, "warm-up: %d machines (discarded)\n", cfg.WarmUp)
		r, err := Measure(ctx, b, cfg, cfg.WarmUp, "warmup", false)
		if err != nil {
			return all, fmt.Errorf("warm-up: %w", err)
		}
		all.WarmUp = &r
	}
	largest := slices.Max(cfg.Sizes)
	profiled := false
	for _, n := range cfg.Sizes {
		for i := range cfg.Runs {
			profile := cfg.ProfileSeconds > 0 && n == largest && !profiled
			load := harness.LoadAverage()
			all.Loads = append(all.Loads, load)
			fmt.Fprintf(log, "N=%d run %d/%d (load %s)\n", n, i+1, cfg.Runs, load)
			r, err := Measure(ctx, b, cfg, n, fmt.Sprintf("n%d-run%d", n, i), profile)
			if err != nil {
				return all, fmt.Errorf("N=%d run %d: %w", n, i+1, err)
			}
			fmt.Fprintf(log, "  all provisioned in %s, %.2f ms and %.0f requests per machine, peak RSS %.1f MiB\n",
				r.Took.Round(10*time.Millisecond), r.PerMachine(r.Took), r.TotalRequests()/float64(n), mib(r.Peak))
			all.Runs = append(all.Runs, r)
			if profile {
				profiled = true
				if all.Profile, err = process.Top(ctx, b.Binary, cfg.ProfilePath, 25); err != nil {
					return all, err
				}
			}
		}
	}
	return all, nil
}
