// Command sharedcache is the shared-cache benchmark (`make
// bench-sharedcache`): what running the three providers as one process
// saves. Against one envtest apiserver loaded with -clusters clusters'
// worth of objects (Cluster, MonolithCluster, Machines and MonolithMachines
// each claiming an address from its namespace's pool, bootstrap and
// kubeconfig Secrets), it runs the capi-monolith binary
//
//	(a) as one process with every module, and
//	(b) as three processes with one provider type each (infra+machinepool,
//	    ipam, runtimeext), as clusterctl would install them,
//
// and measures each process's resident memory (VmRSS, mean of one sample a
// second) right after start-up and, -idle later, in the steady state, once
// Go's periodic GC has let the start-up's garbage go; the watches it
// holds open (its capi_monolith_api_watches_open metric) and the growth of
// the apiserver's WATCH requests (its apiserver_longrunning_requests
// metric). Target: RSS of (a) ≤ 0.5 × the sum of (b).
//
// A discarded warm-up run of (a) first provisions every machine, so that
// every measured run starts from the same, fully reconciled objects. Runs
// of (a) and (b) alternate, -runs of each; a fresh process per run.
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
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"

	infrav1 "github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	ipamv1alpha1 "github.com/capi-monolith/capi-monolith/ipam/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/test/bench/harness"
	"github.com/capi-monolith/capi-monolith/test/bench/harness/process"
	"github.com/capi-monolith/capi-monolith/test/bench/harness/report"
	"github.com/capi-monolith/capi-monolith/test/envtest"
)

// defaultOut is the results file, relative to the repository root.
const defaultOut = "test/bench/results/sharedcache.md"

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "bench-sharedcache:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	cfg := DefaultConfig()
	fs := flag.NewFlagSet("bench-sharedcache", flag.ContinueOnError)
	fs.IntVar(&cfg.Clusters, "clusters", cfg.Clusters, "clusters loaded into the apiserver")
	fs.IntVar(&cfg.PerNamespace, "per-namespace", cfg.PerNamespace, "clusters per namespace (one IP pool per namespace)")
	fs.IntVar(&cfg.MachinesPerCluster, "machines", cfg.MachinesPerCluster, "Machines and MonolithMachines per cluster")
	fs.IntVar(&cfg.Runs, "runs", cfg.Runs, "measured runs of each setup; the median is reported")
	fs.DurationVar(&cfg.Settle, "settle", cfg.Settle, "wait after the processes are steady, before sampling")
	fs.DurationVar(&cfg.Sample, "sample", cfg.Sample, "how long RSS is sampled, once a second")
	fs.DurationVar(&cfg.Idle, "idle", cfg.Idle, "from steady to the steady-RSS window, past Go's 2-minute periodic GC; 0 uses the first window")
	fs.StringVar(&cfg.HeapProfile, "heap-profile", filepath.Join(os.TempDir(), "capi-monolith-sharedcache.heap"), "where the heap profile of (a)'s process is written; empty takes none")
	out := fs.String("out", defaultOut, "Markdown results file; empty writes none")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if cfg.Clusters < 1 || cfg.PerNamespace < 1 || cfg.MachinesPerCluster < 1 || cfg.Runs < 1 || cfg.Sample < time.Second {
		return errors.New("-clusters, -per-namespace, -machines and -runs must be at least 1, -sample at least 1s")
	}
	if cfg.Idle != 0 && cfg.Idle < cfg.Settle+cfg.Sample {
		return errors.New("-idle must be 0 or at least -settle plus -sample")
	}
	if cfg.PerNamespace*cfg.MachinesPerCluster > 253 {
		return errors.New("-per-namespace × -machines must be at most 253: each namespace's pool is a /24")
	}
	ctrl.SetLogger(envtest.TestLogger())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	machine := harness.DescribeMachine(ctx)
	results, loaded, err := runAll(ctx, cfg, os.Stderr)
	if err != nil {
		return err
	}
	if err := writeText(os.Stdout, cfg, results); err != nil {
		return err
	}
	if *out == "" {
		return nil
	}
	return report.WriteFile(*out, func(w io.Writer) error { return writeMarkdown(w, cfg, machine, loaded, results) })
}

// Loaded describes the objects the runs found in the apiserver and the
// conditions of the runs.
type Loaded struct {
	Objects     int
	Took        time.Duration
	Machines    int
	WarmUp      time.Duration
	LoadAverage []string
	// HeapTop is where (a)'s heap went in its last run (pprof -top).
	HeapTop string
}

// runAll starts the apiserver, loads it, warms up and measures; progress goes
// to log.
func runAll(ctx context.Context, cfg Config, log io.Writer) ([]Result, Loaded, error) {
	var loaded Loaded
	b, err := process.NewBench(ctx, log, harness.EnvOptions{
		AddToScheme: []func(*runtime.Scheme) error{infrav1.AddToScheme, ipamv1alpha1.AddToScheme},
		CRDDirs:     []string{"manifests/infra/crd", "manifests/machinepool/crd", "manifests/ipam/crd"},
	})
	if err != nil {
		return nil, loaded, err
	}
	defer b.Close() //nolint:errcheck // nothing to do about it after the figures
	env := b.Env

	fmt.Fprintf(log, "loading %d clusters\n", cfg.Clusters)
	start := time.Now()
	if loaded.Objects, err = Load(ctx, env, cfg); err != nil {
		return nil, loaded, err
	}
	loaded.Took = time.Since(start)

	fmt.Fprintf(log, "loaded %d objects in %s\n", loaded.Objects, loaded.Took.Round(time.Second))
	fmt.Fprintln(log, "warm-up: one process provisions every machine (discarded)")
	start = time.Now()
	warm := cfg
	warm.Settle, warm.Idle = 0, 0 // only there to provision; its memory is not reported
	warm.AwaitMachines = cfg.Clusters * cfg.MachinesPerCluster
	if _, err := Measure(ctx, b, warm, OneProcess, "warmup"); err != nil {
		return nil, loaded, fmt.Errorf("warm-up: %w", err)
	}
	loaded.WarmUp = time.Since(start)
	done, total, err := Provisioned(ctx, env.Client)
	if err != nil {
		return nil, loaded, err
	}
	if want := cfg.Clusters * cfg.MachinesPerCluster; done != want || total != want {
		return nil, loaded, fmt.Errorf("after the warm-up %d of %d MonolithMachines are provisioned and Ready, want %d", done, total, want)
	}
	loaded.Machines = done

	var results []Result
	for i := range cfg.Runs {
		for _, setup := range []Setup{OneProcess, PerProvider} {
			load := harness.LoadAverage()
			loaded.LoadAverage = append(loaded.LoadAverage, load)
			fmt.Fprintf(log, "run %d/%d: %s (load %s)\n", i+1, cfg.Runs, setup.Name, load)
			r, err := Measure(ctx, b, cfg, setup, fmt.Sprintf("run%d", i))
			if err != nil {
				return nil, loaded, fmt.Errorf("run %d, %s: %w", i+1, setup.Name, err)
			}
			fmt.Fprintf(log, "  steady RSS %.1f MiB (%.1f right after start-up), %v watches (apiserver +%v), steady in %s\n",
				mib(r.RSS()), mib(r.StartRSS()), r.Watches(), r.APIServerWatchTotal(), r.Steady.Round(100*time.Millisecond))
			results = append(results, r)
		}
	}
	if cfg.HeapProfile != "" {
		if loaded.HeapTop, err = process.Top(ctx, b.Binary, cfg.HeapProfile, 20, "-sample_index=inuse_space"); err != nil {
			return nil, loaded, err
		}
	}
	return results, loaded, nil
}
