package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/capi-monolith/capi-monolith/test/bench/harness"
	"github.com/capi-monolith/capi-monolith/test/bench/harness/report"
)

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

func ofSize(runs []Result, n int) []Result {
	var out []Result
	for _, r := range runs {
		if r.N == n {
			out = append(out, r)
		}
	}
	return out
}

func summarize(runs []Result, get func(Result) float64) report.Summary {
	v := make([]float64, len(runs))
	for i, r := range runs {
		v[i] = get(r)
	}
	return report.Summarize(v)
}

func tookPerMachine(r Result) float64 { return r.PerMachine(r.Took) }
func cpuPerMachine(r Result) float64  { return r.PerMachine(r.CPU) }

// FiguresTable is one row per size, medians with their spread.
func FiguresTable(cfg Config, all Results) *report.Table {
	t := &report.Table{Columns: []string{"N", "runs", "first create → all provisioned (s)", "per machine (ms)", "machines/s",
		"creates took (s)", "peak RSS MiB (VmHWM)", "process CPU (s)", "CPU per machine (ms)", "API requests per machine",
		"kube-apiserver CPU (s)", "etcd CPU (s)"}}
	for _, n := range cfg.Sizes {
		runs := ofSize(all.Runs, n)
		t.Add(fmt.Sprint(n), fmt.Sprint(len(runs)),
			summarize(runs, func(r Result) float64 { return r.Took.Seconds() }).Format(2),
			summarize(runs, tookPerMachine).Format(2),
			summarize(runs, func(r Result) float64 { return float64(r.N) / r.Took.Seconds() }).Format(1),
			summarize(runs, func(r Result) float64 { return r.Created.Seconds() }).Format(2),
			summarize(runs, func(r Result) float64 { return mib(r.Peak) }).Format(1),
			summarize(runs, func(r Result) float64 { return r.CPU.Seconds() }).Format(2),
			summarize(runs, cpuPerMachine).Format(2),
			summarize(runs, func(r Result) float64 { return r.TotalRequests() / float64(r.N) }).Format(2),
			summarize(runs, func(r Result) float64 { return r.Others["kube-apiserver"].Seconds() }).Format(1),
			summarize(runs, func(r Result) float64 { return r.Others["etcd"].Seconds() }).Format(1))
	}
	return t
}

// TargetTable checks that the cost per machine stays flat from 1,000 to
// 5,000 machines (or between the two largest sizes measured).
func TargetTable(cfg Config, all Results) *report.Table {
	t := &report.Table{Columns: []string{"measure", "value", "target", "met"}}
	sizes := slices.Sorted(slices.Values(cfg.Sizes))
	if len(sizes) < 2 {
		return t
	}
	small, large := sizes[len(sizes)-2], sizes[len(sizes)-1]
	for _, m := range []struct {
		name string
		get  func(Result) float64
	}{{"time", tookPerMachine}, {"process CPU", cpuPerMachine}} {
		a := summarize(ofSize(all.Runs, small), m.get).Median
		b := summarize(ofSize(all.Runs, large), m.get).Median
		ratio := b / a
		met := "NO"
		if ratio <= 1.2 {
			met = "yes"
		}
		t.Add(fmt.Sprintf("%s per machine at %d / at %d (medians %.2f / %.2f ms)", m.name, large, small, b, a),
			fmt.Sprintf("%.2f", ratio), "≤ 1.2", met)
	}
	return t
}

// RunsTable lists every run, the warm-up first.
func RunsTable(all Results) *report.Table {
	t := &report.Table{Columns: []string{"run", "N", "all provisioned (s)", "peak RSS MiB", "process CPU (s)", "requests by method", "load average at start"}}
	row := func(name string, r Result, load string) {
		var req []string
		for _, m := range slices.Sorted(maps.Keys(r.Requests)) {
			req = append(req, fmt.Sprintf("%s %.0f", m, r.Requests[m]))
		}
		t.Add(name, fmt.Sprint(r.N), fmt.Sprintf("%.2f", r.Took.Seconds()), fmt.Sprintf("%.1f", mib(r.Peak)),
			fmt.Sprintf("%.2f", r.CPU.Seconds()), strings.Join(req, ", "), load)
	}
	if all.WarmUp != nil {
		row("warm-up", *all.WarmUp, "")
	}
	for i, r := range all.Runs {
		load := ""
		if i < len(all.Loads) {
			load = all.Loads[i]
		}
		row(fmt.Sprint(i+1), r, load)
	}
	return t
}

func writeText(w io.Writer, cfg Config, all Results) error {
	for _, t := range []*report.Table{FiguresTable(cfg, all), TargetTable(cfg, all), BreakdownTable(all)} {
		fmt.Fprintln(w)
		if err := t.WriteText(w); err != nil {
			return err
		}
	}
	if all.Profile != "" {
		fmt.Fprintf(w, "\nCPU profile of the process (first run of the largest size):\n%s\n", all.Profile)
	}
	return nil
}

func writeMarkdown(w io.Writer, cfg Config, m harness.Machine, all Results) error {
	fmt.Fprintf(w, "# Scale benchmark results\n\n")
	fmt.Fprintf(w, "Made by `go run ./test/bench/scale -n %s -runs %d -warmup %d -profile-seconds %d`. Do not edit: run it again.\n\n",
		(*harness.Ints)(&cfg.Sizes).String(), cfg.Runs, cfg.WarmUp, cfg.ProfileSeconds)
	s := &report.Table{Columns: []string{"setting", "value"}}
	s.Add("date", m.Date.Format(time.RFC3339))
	s.Add("machine", fmt.Sprintf("%s, %d CPUs (nproc)", m.Arch, m.CPUs))
	s.Add("Go", m.GoVersion)
	s.Add("commit", m.Commit)
	s.Add("process", fmt.Sprintf("the `capi-monolith` binary, fresh per run: `--enable-modules=infra --kube-api-qps=%g --kube-api-burst=%g` "+
		"(the binary's defaults), `--infra-concurrency=10` (default), webhooks and diagnostics served", cfg.QPS, 2*cfg.QPS))
	s.Add("objects", fmt.Sprintf("per run, in fresh namespaces: N/%d clusters (%d per namespace), each a Cluster with infrastructure provisioned, "+
		"its inMemory MonolithCluster, bootstrap and kubeconfig Secrets and %d Machines, made before the process starts and not timed",
		cfg.MachinesPerCluster, cfg.ClustersPerNamespace, cfg.MachinesPerCluster))
	s.Add("measured", "N inMemory MonolithMachines (owned by their Machines) created by 16 goroutines through an unthrottled client, "+
		"after the process has reconciled the clusters and is idle; provisioned = a watch sees status.initialization.provisioned and Ready=True")
	s.Add("CPU and memory", "user+system CPU of the process from /proc/<pid>/stat over the measured time; peak RSS is its VmHWM (process started for the run); "+
		"kube-apiserver and etcd are separate processes, reported apart")
	s.Add("API requests", "growth of the process's rest_client_requests_total over the measured time; "+
		"broken down by verb, resource and code: growth of kube-apiserver's apiserver_request_total over the same time, "+
		"less the benchmark's own requests (its creates, list and watch of MonolithMachines, counted by its client, and its reads of /metrics)")
	s.Add("runs", fmt.Sprintf("%d per size, median (min–max); one discarded warm-up run of %d machines first; each run's objects are deleted through the provider afterwards", cfg.Runs, cfg.WarmUp))
	s.Add("randomness", "none: names are deterministic, namespace suffixes are the apiserver's")
	if err := s.WriteMarkdown(w); err != nil {
		return err
	}
	for _, sec := range []struct {
		title string
		t     *report.Table
	}{
		{"Figures: median (min–max)", FiguresTable(cfg, all)},
		{"Target: cost per machine stays flat", TargetTable(cfg, all)},
		{"Runs", RunsTable(all)},
		{"The process's API requests by verb, resource and code", BreakdownTable(all)},
	} {
		fmt.Fprintf(w, "\n## %s\n\n", sec.title)
		if err := sec.t.WriteMarkdown(w); err != nil {
			return err
		}
	}
	if all.Profile != "" {
		fmt.Fprintf(w, "\n## CPU profile of the process, first run of N=%d (%d s from /debug/pprof/profile)\n\n```\n%s\n```\n",
			slices.Max(cfg.Sizes), cfg.ProfileSeconds, all.Profile)
	}
	return nil
}
