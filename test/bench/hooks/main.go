// Command hooks is the runtime extension benchmark (`make bench-hooks`). It
// runs the runtimeext module as users do (the binary's manager against an
// envtest apiserver, Cluster API's exp/runtime/server behind our guard, TLS
// on loopback) and measures, as Cluster API's client calls it:
//
//	(a) a lifecycle hook (BeforeClusterCreate) at a fixed offered rate
//	    (-rate, default 500 calls/s, open loop: a call is sent every 1/rate
//	    whatever the previous ones do): achieved calls/s, p50, p99, max;
//	(b) GeneratePatches on a topology of -mds machine deployments (default
//	    50), one call after another: p50, p99, max.
//
// Targets: (a) p99 ≤ 5 ms, (b) p99 ≤ 200 ms (the Runtime SDK's limit for
// external patches). A missed target is reported, not fatal; a failed call
// is fatal.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/capi-monolith/capi-monolith/test/bench/harness"
	"github.com/capi-monolith/capi-monolith/test/bench/harness/report"
)

const defaultOut = "test/bench/results/hooks.md"

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "bench-hooks:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	cfg := DefaultConfig()
	fs := flag.NewFlagSet("bench-hooks", flag.ContinueOnError)
	fs.Float64Var(&cfg.Rate, "rate", cfg.Rate, "offered rate of lifecycle calls per second")
	fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, "how long lifecycle calls are offered")
	fs.IntVar(&cfg.MachineDeployments, "mds", cfg.MachineDeployments, "machine deployments in the GeneratePatches topology")
	fs.IntVar(&cfg.PatchCalls, "patch-calls", cfg.PatchCalls, "GeneratePatches calls")
	fs.IntVar(&cfg.Runs, "runs", cfg.Runs, "runs; the median is reported")
	out := fs.String("out", defaultOut, "Markdown results file; empty writes none")
	if err := fs.Parse(args); err != nil {
		return err
	}
	// Handlers log at V(2) and above only; keep the benchmark's output to figures.
	ctrl.SetLogger(logr.Discard())
	ctx := context.Background()
	machine := harness.DescribeMachine(ctx)
	var results []Result
	var loads []string
	for i := range cfg.Runs {
		load := harness.LoadAverage()
		loads = append(loads, load)
		fmt.Fprintf(os.Stderr, "run %d/%d (load %s)\n", i+1, cfg.Runs, load)
		r, err := Measure(ctx, cfg)
		if err != nil {
			return err
		}
		results = append(results, r)
	}
	t := Table(cfg, results)
	if err := t.WriteText(os.Stdout); err != nil {
		return err
	}
	if *out == "" {
		return nil
	}
	return report.WriteFile(*out, func(w io.Writer) error { return writeMarkdown(w, cfg, machine, loads, t) })
}

// Table summarises runs: medians with their spread.
func Table(cfg Config, runs []Result) *report.Table {
	col := func(get func(Result) float64) report.Summary {
		v := make([]float64, len(runs))
		for i, r := range runs {
			v[i] = get(r)
		}
		return report.Summarize(v)
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	t := &report.Table{Columns: []string{"measure", "value", "target", "met"}}
	met := func(ok bool) string {
		if ok {
			return "yes"
		}
		return "NO"
	}
	lp99 := col(func(r Result) float64 { return ms(r.Lifecycle.P99) })
	pp99 := col(func(r Result) float64 { return ms(r.Patches.P99) })
	t.Add(fmt.Sprintf("BeforeClusterCreate offered rate (calls/s)"), fmt.Sprintf("%.0f", cfg.Rate))
	t.Add("BeforeClusterCreate achieved (calls/s)", col(func(r Result) float64 { return r.Lifecycle.Rate }).Format(1))
	t.Add("BeforeClusterCreate p50 (ms)", col(func(r Result) float64 { return ms(r.Lifecycle.P50) }).Format(2))
	t.Add("BeforeClusterCreate p99 (ms)", lp99.Format(2), "≤ 5", met(lp99.Median <= 5))
	t.Add("BeforeClusterCreate max (ms)", col(func(r Result) float64 { return ms(r.Lifecycle.Max) }).Format(2))
	t.Add(fmt.Sprintf("GeneratePatches, %d MDs: request size (KiB)", cfg.MachineDeployments), fmt.Sprintf("%.0f", float64(runs[0].PatchRequestBytes)/1024))
	t.Add(fmt.Sprintf("GeneratePatches, %d MDs: p50 (ms)", cfg.MachineDeployments), col(func(r Result) float64 { return ms(r.Patches.P50) }).Format(2))
	t.Add(fmt.Sprintf("GeneratePatches, %d MDs: p99 (ms)", cfg.MachineDeployments), pp99.Format(2), "≤ 200", met(pp99.Median <= 200))
	t.Add(fmt.Sprintf("GeneratePatches, %d MDs: max (ms)", cfg.MachineDeployments), col(func(r Result) float64 { return ms(r.Patches.Max) }).Format(2))
	return t
}

func writeMarkdown(w io.Writer, cfg Config, m harness.Machine, loads []string, t *report.Table) error {
	fmt.Fprintf(w, "# bench-hooks\n\n")
	fmt.Fprintf(w, "`make bench-hooks` on %s, %s, %d CPUs, %s, commit %s. Median of %d runs (min–max); "+
		"load average at the start of each run: %s. Tail latencies are sensitive to other work on the machine.\n\n",
		m.Date.Format(time.RFC3339), m.Arch, m.CPUs, m.GoVersion, m.Commit, cfg.Runs, strings.Join(loads, "; "))
	fmt.Fprintf(w, "Lifecycle: %.0f calls/s offered for %s over TLS on loopback (HTTP/2, Cluster API's client settings). "+
		"The runtimeext module runs in the binary's manager against an envtest apiserver; the requests name a stored Cluster, so the "+
		"lifecycle handler runs the guard, the stored-Cluster lookup, settings, the hold and capacity policies, metrics and Events as in production. "+
		"Client, server and apiserver share the machine's CPUs. "+
		"GeneratePatches: %d calls, one after another, on a topology of %d machine deployments.\n\n",
		cfg.Rate, cfg.Duration, cfg.PatchCalls, cfg.MachineDeployments)
	return t.WriteMarkdown(w)
}
