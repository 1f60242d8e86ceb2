// Command ipam is the IPAM benchmark (`make bench-ipam`). Against one
// envtest apiserver it measures
//
//	(a) how fast a client with the module's rate limit creates IPAddresses,
//	(b) how fast the ipam module, running in-process as the binary runs it,
//	    fulfils N IPAddressClaims from one /16 pool,
//	(c) how long the first and the last 1,000 fulfilments take,
//
// and the peak resident memory of the process. It prints the median of
// -runs runs with their spread and writes the same as Markdown to -out. It
// exits non-zero when a correctness check fails (a claim left unfulfilled,
// an address handed out twice); a missed performance target is reported,
// not fatal.
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
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/capi-monolith/capi-monolith/ipam/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/test/bench/harness"
	"github.com/capi-monolith/capi-monolith/test/bench/harness/report"
	"github.com/capi-monolith/capi-monolith/test/envtest"
)

// defaultOut is the results file, relative to the repository root.
const defaultOut = "test/bench/results/ipam.md"

// defaultSBSOut is the side-by-side mode's results file.
const defaultSBSOut = "test/bench/results/ipam-sbs.md"

// defaultRestartOut is the side-by-side mode's results file with -restart.
const defaultRestartOut = "test/bench/results/ipam-restart.md"

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "bench-ipam:", err)
		os.Exit(1)
	}
}

type options struct {
	cfg Config
	// peerSource selects the side-by-side mode; sbs is its settings.
	peerSource    string
	sbs           SBSConfig
	out           string
	cpuProfile    string
	apiServerHeap string
}

func parseFlags(args []string) (options, error) {
	o := options{cfg: DefaultConfig()}
	fs := flag.NewFlagSet("bench-ipam", flag.ContinueOnError)
	fs.Var((*harness.Ints)(&o.cfg.Sizes), "n", "Comma-separated numbers of claims N, one row of figures each.")
	fs.IntVar(&o.cfg.Runs, "runs", o.cfg.Runs, "Measured runs per N; the figures are their median.")
	var qps float64
	fs.Float64Var(&qps, "qps", float64(o.cfg.Rate.QPS), "QPS of the raw create client (a) and of the module (--kube-api-qps).")
	fs.IntVar(&o.cfg.Rate.Burst, "burst", o.cfg.Rate.Burst, "Burst of the raw create client (a) and of the module (--kube-api-burst).")
	fs.IntVar(&o.cfg.Concurrency, "concurrency", o.cfg.Concurrency, "--ipam-concurrency, and the goroutines of the raw create client.")
	fs.IntVar(&o.cfg.RawObjects, "raw", o.cfg.RawObjects, "IPAddresses created for (a), M.")
	fs.IntVar(&o.cfg.CreateWorkers, "create-workers", o.cfg.CreateWorkers, "Goroutines creating claims with an unthrottled client.")
	fs.IntVar(&o.cfg.Warmup, "warmup", o.cfg.Warmup, "N of the discarded warm-up run; 0 skips it.")
	fs.IntVar(&o.cfg.Window, "window", o.cfg.Window, "Claims in the first and last windows (c).")
	fs.DurationVar(&o.cfg.RunTimeout, "timeout", o.cfg.RunTimeout, "Longest time one run may take.")
	fs.BoolVar(&o.cfg.Cleanup, "cleanup", o.cfg.Cleanup, "Delete each run's objects once it is measured, so that runs stay independent.")
	fs.StringVar(&o.out, "out", defaultOut, "Markdown results file; a relative path is relative to the repository root. Empty writes none.")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "Write a CPU profile of the whole benchmark (warm-up included) to this file.")
	fs.StringVar(&o.apiServerHeap, "apiserver-heap", "", "Write kube-apiserver's heap profile, taken after the last run, to this file.")
	fs.StringVar(&o.peerSource, "peer-source", "", "Side-by-side mode: the in-cluster IPAM provider's source, a git directory (its HEAD is built) or a folder, built in a scratch folder and run as a process beside the capi-monolith binary.")
	fs.IntVar(&o.sbs.Marginal, "marginal", 1000, "Side-by-side mode: claims made, once N are fulfilled, into the pool then holding N addresses; 0 skips them.")
	fs.DurationVar(&o.sbs.MarginalTimeout, "marginal-timeout", 15*time.Minute, "Side-by-side mode: the longest the marginal claims may take; a side still short then is recorded with how many it fulfilled, and the run goes on (0: only -timeout bounds them).")
	fs.BoolVar(&o.sbs.Restart, "restart", false, "Side-by-side mode: after the N (and marginal) claims, restart each side's process with them bound (a new claim made at once), then stop it, make N more claims and start it again to take them over.")
	var sides string
	fs.StringVar(&sides, "sides", sideOurs+","+sidePeer, "Side-by-side mode: the sides run, comma-separated.")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	o.cfg.Rate.QPS = float32(qps)
	o.cfg.Progress = os.Stderr
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if o.peerSource == "" {
		for _, name := range []string{"marginal", "marginal-timeout", "restart", "sides"} {
			if set[name] {
				return o, fmt.Errorf("-%s applies to the side-by-side mode only (-peer-source)", name)
			}
		}
		return o, o.cfg.Validate()
	}
	// Each side runs with its own defaults, as a user runs it.
	for _, name := range []string{"qps", "burst", "concurrency", "window", "cleanup", "apiserver-heap"} {
		if set[name] {
			return o, fmt.Errorf("-%s does not apply to the side-by-side mode: each side runs with its own defaults", name)
		}
	}
	o.sbs.Sides = strings.Split(sides, ",")
	o.sbs.Sizes, o.sbs.Runs, o.sbs.RawObjects = o.cfg.Sizes, o.cfg.Runs, o.cfg.RawObjects
	o.sbs.CreateWorkers, o.sbs.Warmup, o.sbs.RunTimeout = o.cfg.CreateWorkers, o.cfg.Warmup, o.cfg.RunTimeout
	if !set["n"] {
		o.sbs.Sizes = []int{1000, 5000}
	}
	if !set["runs"] {
		o.sbs.Runs = 1
	}
	if !set["out"] {
		o.out = defaultSBSOut
		if o.sbs.Restart {
			o.out = defaultRestartOut
		}
	}
	return o, o.sbs.Validate()
}

func run(args []string) (retErr error) {
	o, err := parseFlags(args)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The module logs every allocation at Info; as in the test suites, logs
	// are off unless CAPI_MONOLITH_TEST_LOGS is set.
	ctrl.SetLogger(envtest.TestLogger())

	out := o.out
	if out != "" && !filepath.IsAbs(out) {
		root, err := harness.RepoRoot()
		if err != nil {
			return err
		}
		out = filepath.Join(root, out)
	}

	start := time.Now()
	env, err := startEnvironment(ctx)
	if err != nil {
		return err
	}
	defer func() { retErr = errors.Join(retErr, env.Stop()) }()
	o.cfg.Progress.Write(fmt.Appendf(nil, "bench-ipam: envtest started in %s\n", time.Since(start).Round(time.Millisecond)))

	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			return fmt.Errorf("failed to create the CPU profile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("failed to start the CPU profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}

	if o.peerSource != "" {
		return runSideBySide(ctx, env, o, out, args)
	}
	res, err := Measure(ctx, env, o.cfg)
	if err != nil {
		return err
	}
	if o.apiServerHeap != "" {
		if err := harness.SaveAPIServerProfile(ctx, env.Config, "heap", o.apiServerHeap); err != nil {
			return err
		}
	}
	if err := res.WriteText(os.Stdout); err != nil {
		return err
	}
	if out != "" {
		if err := writeResults(res, out, "go run ./test/bench/ipam "+strings.Join(args, " ")); err != nil {
			return err
		}
		fmt.Printf("Results written to %s\n", out)
	}
	if problems := res.Problems(); len(problems) > 0 {
		return fmt.Errorf("correctness checks failed:\n  %s", strings.Join(problems, "\n  "))
	}
	return nil
}

func runSideBySide(ctx context.Context, env *envtest.Environment, o options, out string, args []string) error {
	progress := func(format string, a ...any) { fmt.Fprintf(os.Stderr, "bench-ipam: "+format+"\n", a...) }
	res, err := MeasureSideBySide(ctx, env, o.sbs, o.peerSource, progress)
	if err != nil {
		return err
	}
	if err := res.WriteText(os.Stdout); err != nil {
		return err
	}
	if out != "" {
		command := "go run ./test/bench/ipam " + strings.Join(args, " ")
		if err := report.WriteFile(out, func(w io.Writer) error { return res.WriteMarkdown(w, strings.TrimSpace(command)) }); err != nil {
			return err
		}
		fmt.Printf("Results written to %s\n", out)
	}
	if problems := res.Problems(); len(problems) > 0 {
		return fmt.Errorf("correctness checks failed:\n  %s", strings.Join(problems, "\n  "))
	}
	return nil
}

func startEnvironment(ctx context.Context) (*envtest.Environment, error) {
	return harness.StartEnvironment(ctx, harness.EnvOptions{
		AddToScheme: []func(*runtime.Scheme) error{v1alpha1.AddToScheme},
		CRDDirs:     []string{"manifests/ipam/crd"},
	})
}

func writeResults(res *Results, path, command string) error {
	return report.WriteFile(path, func(w io.Writer) error { return res.WriteMarkdown(w, strings.TrimSpace(command)) })
}
