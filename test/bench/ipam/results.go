package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/capi-monolith/capi-monolith/test/bench/harness"
	"github.com/capi-monolith/capi-monolith/test/bench/harness/memstat"
	"github.com/capi-monolith/capi-monolith/test/bench/harness/report"
	"github.com/capi-monolith/capi-monolith/test/envtest"
)

// The targets of the issue that asked for this benchmark.
const (
	// targetShare: the module fulfils claims at least this share of the
	// raw create rate, (b) ≥ 0.25 × (a).
	targetShare = 0.25
	// targetLastFirst: the last window takes at most this many times the
	// first one.
	targetLastFirst = 1.5
)

// Results are every run of one invocation.
type Results struct {
	Config     Config
	Machine    harness.Machine
	ModuleArgs []string
	// LoadBefore and LoadAfter are /proc/loadavg around the measured runs.
	LoadBefore, LoadAfter string
	// Warmup is the discarded run, nil when there was none.
	Warmup *RunResult
	Runs   []RunResult
}

// Measure makes the warm-up run, then cfg.Runs runs of each size, each with
// a fresh namespace, pool and manager against the same apiserver.
func Measure(ctx context.Context, env *envtest.Environment, cfg Config) (*Results, error) {
	b, err := NewBench(env, cfg)
	if err != nil {
		return nil, err
	}
	r := &Results{Config: cfg, Machine: harness.DescribeMachine(ctx), ModuleArgs: b.ModuleArgs("<run namespace>")}
	if cfg.Warmup > 0 {
		b.progress("warm-up: N=%d", cfg.Warmup)
		w, err := b.Run(ctx, cfg.Warmup, min(cfg.RawObjects, cfg.Warmup))
		if err != nil {
			return r, fmt.Errorf("the warm-up run failed: %w", err)
		}
		r.Warmup = &w
	}
	r.LoadBefore = harness.LoadAverage()
	for _, n := range cfg.Sizes {
		for i := range cfg.Runs {
			b.progress("N=%d: run %d/%d (load average %s)", n, i+1, cfg.Runs, harness.LoadAverage())
			res, err := b.Run(ctx, n, cfg.RawObjects)
			if err != nil {
				return r, fmt.Errorf("run %d/%d with N=%d failed: %w", i+1, cfg.Runs, n, err)
			}
			r.Runs = append(r.Runs, res)
		}
	}
	r.LoadAfter = harness.LoadAverage()
	return r, nil
}

// Problems returns every failed correctness check, prefixed by its run.
func (r *Results) Problems() []string {
	var out []string
	for i, run := range r.Runs {
		for _, p := range run.Problems {
			out = append(out, fmt.Sprintf("run %d (N=%d): %s", i+1, run.N, p))
		}
	}
	return out
}

// row is the summary of the runs of one size.
type row struct {
	n, windowSize                                int
	raw, fulfil, share, first, last, lastOnFirst report.Summary
	create, distinct, peak, sampled, cores       report.Summary
	rawU, shareU, writes                         report.Summary
	problems                                     int
}

func (r *Results) rows() []row {
	var rows []row
	for _, n := range r.Config.Sizes {
		var raw, fulfil, share, first, last, lastOnFirst, create, distinct, peak, sampled, cores, rawU, shareU, writes []float64
		rw := row{n: n, windowSize: min(r.Config.Window, n)}
		for _, run := range r.Runs {
			if run.N != n {
				continue
			}
			raw = append(raw, run.RawRate)
			fulfil = append(fulfil, run.FulfilRate)
			share = append(share, run.FulfilRate/run.RawRate)
			rawU = append(rawU, run.RawUnthrottledRate)
			shareU = append(shareU, run.FulfilRate/run.RawUnthrottledRate)
			writes = append(writes, run.WritesPerClaim)
			first = append(first, run.FirstWindow.Seconds())
			last = append(last, run.LastWindow.Seconds())
			lastOnFirst = append(lastOnFirst, run.LastWindow.Seconds()/run.FirstWindow.Seconds())
			create = append(create, run.CreateRate)
			distinct = append(distinct, float64(run.Distinct))
			peak = append(peak, mib(run.PeakRSS))
			sampled = append(sampled, mib(run.SampledRSS))
			cores = append(cores, run.CPU.Total().Seconds()/run.CPUWall.Seconds())
			rw.problems += len(run.Problems)
		}
		rw.raw, rw.fulfil, rw.share = report.Summarize(raw), report.Summarize(fulfil), report.Summarize(share)
		rw.rawU, rw.shareU, rw.writes = report.Summarize(rawU), report.Summarize(shareU), report.Summarize(writes)
		rw.first, rw.last, rw.lastOnFirst = report.Summarize(first), report.Summarize(last), report.Summarize(lastOnFirst)
		rw.create, rw.distinct = report.Summarize(create), report.Summarize(distinct)
		rw.peak, rw.sampled, rw.cores = report.Summarize(peak), report.Summarize(sampled), report.Summarize(cores)
		rows = append(rows, rw)
	}
	return rows
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

func (r *Results) figures() *report.Table {
	w := r.Config.Window
	t := &report.Table{Columns: []string{
		"N", "runs", "(a) raw creates/s", "(b) claims fulfilled/s", "(b)/(a)",
		fmt.Sprintf("(a′) raw creates/s, unthrottled, %d goroutines", rawUnthrottledWorkers), "(b)/(a′)", "module writes per claim",
		fmt.Sprintf("first %d (s)", w), fmt.Sprintf("last %d (s)", w), "last/first",
		"claims created/s (unthrottled)", "distinct addresses", "peak RSS MiB (VmHWM)", "max sampled RSS MiB",
		fmt.Sprintf("CPU cores busy in (b), of %d", r.Machine.CPUs),
	}}
	for _, rw := range r.rows() {
		t.Add(strconv.Itoa(rw.n), strconv.Itoa(rw.raw.Runs), rw.raw.Format(1), rw.fulfil.Format(1), rw.share.Format(3),
			rw.rawU.Format(1), rw.shareU.Format(3), rw.writes.Format(2),
			rw.first.Format(2), rw.last.Format(2), rw.lastOnFirst.Format(2),
			rw.create.Format(1), rw.distinct.Format(0), rw.peak.Format(1), rw.sampled.Format(1), rw.cores.Format(2))
	}
	return t
}

func (r *Results) targets() *report.Table {
	t := &report.Table{Columns: []string{
		"N", fmt.Sprintf("(b) ≥ %.2f × (a)", targetShare), fmt.Sprintf("last ≤ %.1f × first", targetLastFirst), "correct (distinct addresses = N, all fulfilled)",
	}}
	for _, rw := range r.rows() {
		share := verdict(rw.share.Median >= targetShare, fmt.Sprintf("%.3f", rw.share.Median))
		lastFirst := verdict(rw.lastOnFirst.Median <= targetLastFirst, fmt.Sprintf("%.2f", rw.lastOnFirst.Median))
		if rw.n <= rw.windowSize {
			lastFirst = fmt.Sprintf("n/a: N ≤ %d, one window", rw.windowSize)
		}
		correct := "yes, every run"
		if rw.problems > 0 {
			correct = fmt.Sprintf("NO: %d checks failed", rw.problems)
		}
		t.Add(strconv.Itoa(rw.n), share, lastFirst, correct)
	}
	return t
}

func verdict(met bool, value string) string {
	if met {
		return value + " met"
	}
	return value + " MISSED"
}

func (r *Results) runs() *report.Table {
	t := &report.Table{Columns: []string{
		"run", "N", "(a)/s", "(b)/s", "first (s)", "last (s)", "created/s", "fulfilled", "addresses", "distinct", "pool used",
		"VmHWM MiB", "CPU cores busy in (b)", "apiserver/etcd RSS MiB", "load average at end", "problems",
	}}
	all := r.Runs
	label := func(i int) string { return strconv.Itoa(i + 1) }
	if r.Warmup != nil {
		all = append([]RunResult{*r.Warmup}, all...)
		label = func(i int) string {
			if i == 0 {
				return "warm-up"
			}
			return strconv.Itoa(i)
		}
	}
	for i, run := range all {
		peak := memstat.MiB(run.PeakRSS)
		if !run.PeakReset {
			peak += " (lifetime)"
		}
		t.Add(label(i), strconv.Itoa(run.N), fmt.Sprintf("%.1f", run.RawRate), fmt.Sprintf("%.1f", run.FulfilRate),
			seconds(run.FirstWindow), seconds(run.LastWindow), fmt.Sprintf("%.1f", run.CreateRate),
			strconv.Itoa(run.Fulfilled), strconv.Itoa(run.Addresses), strconv.Itoa(run.Distinct), strconv.FormatInt(run.PoolUsed, 10),
			peak, run.CPU.Cores(run.CPUWall), memstat.MiB(run.ControlPlaneRSS["kube-apiserver"])+" / "+memstat.MiB(run.ControlPlaneRSS["etcd"]),
			run.LoadAverage, strings.Join(run.Problems, "; "))
	}
	return t
}

// requests lists the API requests of the module and of the feeding client
// in the last run of each size.
func (r *Results) requests() *report.Table {
	t := &report.Table{Columns: []string{"N", "client", "request", "count", "per claim", "mean server time (ms)"}}
	for _, n := range r.Config.Sizes {
		var last *RunResult
		for i := range r.Runs {
			if r.Runs[i].N == n {
				last = &r.Runs[i]
			}
		}
		if last == nil {
			continue
		}
		for _, part := range []struct {
			client string
			counts []harness.RequestCount
		}{{"module", last.ModuleRequests}, {"feed", last.FeedRequests}} {
			for _, rc := range part.counts {
				mean := "–"
				if rc.Verb != "WATCH" && rc.Count > 0 {
					mean = fmt.Sprintf("%.1f", float64(rc.Total.Microseconds())/1000/float64(rc.Count))
				}
				t.Add(strconv.Itoa(n), part.client, rc.Verb+" "+rc.Resource, strconv.Itoa(rc.Count),
					fmt.Sprintf("%.2f", float64(rc.Count)/float64(n)), mean)
			}
		}
	}
	return t
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.2f", d.Seconds()) }

// settings describes how the figures were made, one line per fact.
func (r *Results) settings() [][2]string {
	c, m := r.Config, r.Machine
	w := c.Window
	warmup := "none"
	if c.Warmup > 0 {
		warmup = fmt.Sprintf("one run with N=%d (and %d raw creates) before measuring, discarded", c.Warmup, min(c.RawObjects, c.Warmup))
	}
	cleanup := "each run's objects are left in place (-cleanup=false), so later runs meet a larger apiserver"
	if c.Cleanup {
		cleanup = "each run's claims, addresses and pool are deleted after it is measured (finalizers removed by the benchmark, the module being stopped)"
	}
	return [][2]string{
		{"date", m.Date.Format(time.RFC3339)},
		{"machine", fmt.Sprintf("%s, %d CPUs (nproc)", m.Arch, m.CPUs)},
		{"Go", m.GoVersion},
		{"commit", m.Commit},
		{"load average (1/5/15 min)", fmt.Sprintf("before the measured runs %s, after %s (the machine is shared with other test runs)", r.LoadBefore, r.LoadAfter)},
		{"client settings", fmt.Sprintf("%s for both (a) and the module (--kube-api-qps/--kube-api-burst); controller-runtime keeps one token bucket per resource type", c.Rate)},
		{"(a) raw creates", fmt.Sprintf("%d IPAddresses created by %d goroutines through one fresh client per run", c.RawObjects, c.Concurrency)},
		{"(a′) raw creates, unthrottled", fmt.Sprintf("%d IPAddresses created by %d goroutines through one fresh client with no rate limit (QPS -1): what the apiserver takes, so that (b)/(a) is not read as better than it is", c.RawObjects, rawUnthrottledWorkers)},
		{"writes per claim", "the module's POST, PUT, PATCH and DELETE requests from its start to the N-th fulfilment, over N (pool status writes included)"},
		{"(b) module", fmt.Sprintf("in-process manager.New with `%s`; one pool %s prefix %d per run", strings.Join(r.ModuleArgs, " "), poolCIDR, poolPrefix)},
		{"claims", fmt.Sprintf("created by %d goroutines with an unthrottled client (QPS -1), so that creation is not the bottleneck; fulfilled = a watch sees status.addressRef.name set and Ready=True", c.CreateWorkers)},
		{"(b) rate", "N / (time from the first create to the N-th fulfilment)"},
		{"(c) windows", fmt.Sprintf("first: from the first create to the %d-th fulfilment; last: from the (N−%d)-th to the N-th fulfilment", w, w)},
		{"peak RSS", "VmHWM of the benchmark process (the module, the claim-feeding client and the watch), reset through /proc/self/clear_refs before each run; kube-apiserver and etcd are separate processes and not counted"},
		{"CPU", "user+system CPU time of this process (self), kube-apiserver and etcd from the first create to the N-th fulfilment, over that wall time, read from /proc/<pid>/stat"},
		{"runs", fmt.Sprintf("median of %d runs per N, (min–max); fresh namespace, pool and manager per run, same envtest apiserver; %s", c.Runs, cleanup)},
		{"warm-up", warmup},
		{"randomness", "none: claim names and raw addresses are deterministic; namespace suffixes are the apiserver's"},
	}
}

// WriteText prints the figures for the terminal.
func (r *Results) WriteText(w io.Writer) error {
	var b strings.Builder
	for _, s := range r.settings() {
		fmt.Fprintf(&b, "%-26s %s\n", s[0]+":", s[1])
	}
	if _, err := io.WriteString(w, b.String()+"\n"); err != nil {
		return fmt.Errorf("failed to write the results: %w", err)
	}
	for _, part := range []struct {
		title string
		table *report.Table
	}{{"Figures (median (min–max))", r.figures()}, {"Targets (on the medians)", r.targets()}, {"Runs", r.runs()}, {"API requests from the module's start to the N-th fulfilment (last run of each N)", r.requests()}} {
		if _, err := fmt.Fprintf(w, "%s\n", part.title); err != nil {
			return fmt.Errorf("failed to write the results: %w", err)
		}
		if err := part.table.WriteText(w); err != nil {
			return err
		}
		if _, err := fmt.Fprintln(w); err != nil {
			return fmt.Errorf("failed to write the results: %w", err)
		}
	}
	return nil
}

// WriteMarkdown writes the results file.
func (r *Results) WriteMarkdown(w io.Writer, command string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# IPAM benchmark results\n\nMade by `%s`. Do not edit: run it again.\n\n", command)
	b.WriteString("| setting | value |\n| --- | --- |\n")
	for _, s := range r.settings() {
		fmt.Fprintf(&b, "| %s | %s |\n", s[0], strings.ReplaceAll(s[1], "|", `\|`))
	}
	for _, part := range []struct {
		title string
		table *report.Table
	}{{"Figures: median (min–max)", r.figures()}, {"Targets, on the medians", r.targets()}, {"Runs", r.runs()}, {"API requests from the module's start to the N-th fulfilment, last run of each N", r.requests()}} {
		fmt.Fprintf(&b, "\n## %s\n\n", part.title)
		if err := part.table.WriteMarkdown(&b); err != nil {
			return err
		}
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("failed to write the results: %w", err)
	}
	return nil
}
