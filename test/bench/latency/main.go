// Command latency is the reconcile latency benchmark (`make bench-latency`):
// how long a MonolithMachine waits to be provisioned when they keep coming.
// Against one envtest apiserver, it starts the capi-monolith binary with
// `--enable-modules=infra` as a fresh process per run and creates inMemory
// MonolithMachines (their Clusters and Machines made beforehand, as Cluster
// API core would) at a steady -rate (default 50/s) for -duration (default
// 60 s), open loop, and reports p50 / p99 / max of the time from sending a
// machine's create to a watch seeing it provisioned
// (status.initialization.provisioned and Ready=True). Median of -runs runs
// with their spread, after a discarded warm-up run of -warmup at the same
// rate; every run's objects are deleted through the provider afterwards.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
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
const defaultOut = "test/bench/results/latency.md"

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "bench-latency:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	cfg := DefaultConfig()
	fs := flag.NewFlagSet("bench-latency", flag.ContinueOnError)
	fs.Float64Var(&cfg.Rate, "rate", cfg.Rate, "offered MonolithMachine creates per second")
	fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, "how long creates are offered")
	fs.IntVar(&cfg.Runs, "runs", cfg.Runs, "measured runs; the median is reported")
	fs.DurationVar(&cfg.WarmUp, "warmup", cfg.WarmUp, "length of the discarded warm-up run; 0 skips it")
	fs.Var((*harness.Floats)(&cfg.QPS), "qps", "comma-separated --kube-api-qps settings of the process to measure (burst twice each)")
	out := fs.String("out", defaultOut, "Markdown results file; empty writes none")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if cfg.Rate <= 0 || cfg.Duration <= 0 || cfg.Runs < 1 || len(cfg.QPS) == 0 || cfg.Rate*cfg.Duration.Seconds() < 1 {
		return errors.New("-rate, -duration, -runs and -qps must be positive, and offer at least one create")
	}
	ctrl.SetLogger(envtest.TestLogger())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	machine := harness.DescribeMachine(ctx)
	all, err := runAll(ctx, cfg, os.Stderr)
	if err != nil {
		return err
	}
	fmt.Println()
	if err := Table(cfg, all.Runs).WriteText(os.Stdout); err != nil {
		return err
	}
	if *out == "" {
		return nil
	}
	return report.WriteFile(*out, func(w io.Writer) error { return writeMarkdown(w, cfg, machine, all) })
}

// Results are everything runAll measured.
type Results struct {
	Runs   []Result
	WarmUp *Result
	Loads  []string
}

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
		fmt.Fprintf(log, "warm-up: %s at %g/s, QPS %g (discarded)\n", cfg.WarmUp, cfg.Rate, cfg.QPS[0])
		r, err := Measure(ctx, b, cfg, cfg.QPS[0], cfg.WarmUp, "warmup")
		if err != nil {
			return all, fmt.Errorf("warm-up: %w", err)
		}
		all.WarmUp = &r
	}
	for _, qps := range cfg.QPS {
		for i := range cfg.Runs {
			load := harness.LoadAverage()
			all.Loads = append(all.Loads, load)
			fmt.Fprintf(log, "QPS %g run %d/%d (load %s)\n", qps, i+1, cfg.Runs, load)
			r, err := Measure(ctx, b, cfg, qps, cfg.Duration, fmt.Sprintf("qps%g-run%d", qps, i))
			if err != nil {
				return all, fmt.Errorf("QPS %g run %d: %w", qps, i+1, err)
			}
			fmt.Fprintf(log, "  p50 %s, p99 %s, max %s\n", r.P50.Round(time.Millisecond), r.P99.Round(time.Millisecond), r.Max.Round(time.Millisecond))
			all.Runs = append(all.Runs, r)
		}
	}
	return all, nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Table summarises runs, one column per QPS setting: medians with their
// spread.
func Table(cfg Config, runs []Result) *report.Table {
	t := &report.Table{Columns: []string{"measure"}}
	byQPS := make([][]Result, len(cfg.QPS))
	for i, qps := range cfg.QPS {
		t.Columns = append(t.Columns, fmt.Sprintf("--kube-api-qps=%g", qps))
		for _, r := range runs {
			if r.QPS == qps {
				byQPS[i] = append(byQPS[i], r)
			}
		}
	}
	row := func(name string, prec int, get func(Result) float64) {
		cells := []string{name}
		for _, rs := range byQPS {
			v := make([]float64, len(rs))
			for i, r := range rs {
				v[i] = get(r)
			}
			cells = append(cells, report.Summarize(v).Format(prec))
		}
		t.Add(cells...)
	}
	row("machines per run", 0, func(r Result) float64 { return float64(r.N) })
	row("creates achieved (per s)", 1, func(r Result) float64 { return r.Offered })
	row("create → provisioned p50 (ms)", 0, func(r Result) float64 { return ms(r.P50) })
	row("create → provisioned p99 (ms)", 0, func(r Result) float64 { return ms(r.P99) })
	row("create → provisioned max (ms)", 0, func(r Result) float64 { return ms(r.Max) })
	row("create → provisioned mean (ms)", 0, func(r Result) float64 { return ms(r.Mean) })
	row("last create → last provisioned (ms)", 0, func(r Result) float64 { return ms(r.Drain) })
	row("first create → last provisioned (s)", 1, func(r Result) float64 { return r.Wall.Seconds() })
	row("process CPU over the run (s)", 1, func(r Result) float64 { return r.CPU.Seconds() })
	row("kube-apiserver CPU over the run (s)", 1, func(r Result) float64 { return r.Others["kube-apiserver"].Seconds() })
	row("etcd CPU over the run (s)", 1, func(r Result) float64 { return r.Others["etcd"].Seconds() })
	row("benchmark's creates and watch, CPU (s)", 1, func(r Result) float64 { return r.Others[harness.Self].Seconds() })
	row("process API requests per machine", 2, func(r Result) float64 { return r.Requests / float64(r.N) })
	row("process peak RSS (MiB)", 1, func(r Result) float64 { return float64(r.Peak) / (1 << 20) })
	return t
}

func writeMarkdown(w io.Writer, cfg Config, m harness.Machine, all Results) error {
	fmt.Fprintf(w, "# Reconcile latency benchmark results\n\n")
	fmt.Fprintf(w, "Made by `go run ./test/bench/latency -rate %g -duration %s -runs %d -qps %s`. Do not edit: run it again.\n\n", cfg.Rate, cfg.Duration, cfg.Runs, (*harness.Floats)(&cfg.QPS).String())
	s := &report.Table{Columns: []string{"setting", "value"}}
	s.Add("date", m.Date.Format(time.RFC3339))
	s.Add("machine", fmt.Sprintf("%s, %d CPUs (nproc)", m.Arch, m.CPUs))
	s.Add("Go", m.GoVersion)
	s.Add("commit", m.Commit)
	s.Add("load average (1/5/15 min) at the start of each run", strings.Join(all.Loads, "; "))
	s.Add("process", fmt.Sprintf("the `capi-monolith` binary, fresh per run: `--enable-modules=infra --kube-api-qps=Q --kube-api-burst=2Q` for Q in %s "+
		"(100/200 are the binary's defaults), `--infra-concurrency=10` (default)", (*harness.Floats)(&cfg.QPS).String()))
	s.Add("load", fmt.Sprintf("%g inMemory MonolithMachine creates per second for %s, open loop (a create is sent every %s whatever earlier ones do), "+
		"each from its own goroutine through an unthrottled client; their Clusters (10 Machines each) and Machines made before the process starts",
		cfg.Rate, cfg.Duration, time.Duration(float64(time.Second)/cfg.Rate)))
	s.Add("CPU", "user+system CPU time from /proc/<pid>/stat, from before the first create to the last machine provisioned, "+
		"of the capi-monolith process, of kube-apiserver and etcd (separate processes) and of the benchmark process itself; the machine has 2 cores")
	s.Add("latency", "from sending a machine's create to a watch seeing status.initialization.provisioned and Ready=True; nearest-rank percentiles over all machines of a run")
	s.Add("runs", fmt.Sprintf("%d per QPS setting, median (min–max); one discarded warm-up run of %s first; each run's objects deleted through the provider afterwards", cfg.Runs, cfg.WarmUp))
	if err := s.WriteMarkdown(w); err != nil {
		return err
	}
	fmt.Fprintf(w, "\n## Figures: median (min–max)\n\n")
	if err := Table(cfg, all.Runs).WriteMarkdown(w); err != nil {
		return err
	}
	runs := &report.Table{Columns: []string{"run", "--kube-api-qps", "machines", "p50 (ms)", "p99 (ms)", "max (ms)", "achieved creates/s", "requests per machine"}}
	row := func(name string, r Result) {
		runs.Add(name, fmt.Sprintf("%g", r.QPS), fmt.Sprint(r.N), fmt.Sprintf("%.0f", ms(r.P50)), fmt.Sprintf("%.0f", ms(r.P99)), fmt.Sprintf("%.0f", ms(r.Max)),
			fmt.Sprintf("%.1f", r.Offered), fmt.Sprintf("%.2f", r.Requests/float64(r.N)))
	}
	if all.WarmUp != nil {
		row("warm-up", *all.WarmUp)
	}
	for i, r := range all.Runs {
		row(fmt.Sprint(i+1), r)
	}
	fmt.Fprintf(w, "\n## Runs\n\n")
	return runs.WriteMarkdown(w)
}
