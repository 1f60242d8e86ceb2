package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/capi-monolith/capi-monolith/test/bench/harness"
	"github.com/capi-monolith/capi-monolith/test/bench/harness/report"
)

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

// bySetup splits results into the runs of each setup, in run order.
func bySetup(results []Result) (one, three []Result) {
	for _, r := range results {
		if r.Setup.Name == OneProcess.Name {
			one = append(one, r)
		} else {
			three = append(three, r)
		}
	}
	return one, three
}

func summarize(runs []Result, get func(Result) float64) report.Summary {
	v := make([]float64, len(runs))
	for i, r := range runs {
		v[i] = get(r)
	}
	return report.Summarize(v)
}

// Ratio is the steady RSS of (a) over the sum of (b), run by run (runs
// alternate, so run i of each ran under the same conditions).
func Ratio(results []Result) report.Summary { return ratio(results, Result.RSS) }

func ratio(results []Result, rss func(Result) uint64) report.Summary {
	one, three := bySetup(results)
	var v []float64
	for i := range min(len(one), len(three)) {
		v = append(v, float64(rss(one[i]))/float64(rss(three[i])))
	}
	return report.Summarize(v)
}

// SetupTable is one row per setup.
func SetupTable(results []Result) *report.Table {
	t := &report.Table{Columns: []string{"setup", "processes", "steady RSS MiB (sum)", "RSS right after start-up MiB (sum)", "peak RSS MiB (sum)",
		"watches held (process side)", "apiserver WATCH requests added", "start to steady (s)", "CPU s, start to end (sum)"}}
	one, three := bySetup(results)
	for _, runs := range [][]Result{one, three} {
		if len(runs) == 0 {
			continue
		}
		t.Add(runs[0].Setup.Name, fmt.Sprint(len(runs[0].Processes)),
			summarize(runs, func(r Result) float64 { return mib(r.RSS()) }).Format(1),
			summarize(runs, func(r Result) float64 { return mib(r.StartRSS()) }).Format(1),
			summarize(runs, func(r Result) float64 {
				var s uint64
				for _, p := range r.Processes {
					s += p.Peak
				}
				return mib(s)
			}).Format(1),
			summarize(runs, Result.Watches).Format(0),
			summarize(runs, Result.APIServerWatchTotal).Format(0),
			summarize(runs, func(r Result) float64 { return r.Steady.Seconds() }).Format(1),
			summarize(runs, func(r Result) float64 {
				var s time.Duration
				for _, p := range r.Processes {
					s += p.CPU
				}
				return s.Seconds()
			}).Format(1))
	}
	return t
}

// TargetTable compares (a) with (b).
func TargetTable(results []Result) *report.Table {
	t := &report.Table{Columns: []string{"measure", "value", "target", "met"}}
	steady := Ratio(results)
	met := "NO"
	if steady.Median <= 0.5 {
		met = "yes"
	}
	t.Add("steady RSS of (a) / sum of (b)", steady.Format(3), "≤ 0.5", met)
	t.Add("RSS right after start-up of (a) / sum of (b)", ratio(results, Result.StartRSS).Format(3))
	one, three := bySetup(results)
	var w []float64
	for i := range min(len(one), len(three)) {
		w = append(w, one[i].Watches()/three[i].Watches())
	}
	t.Add("watches of (a) / sum of (b)", report.Summarize(w).Format(3))
	return t
}

// ProcessTable is one row per process, medians over the runs of its setup.
func ProcessTable(results []Result) *report.Table {
	t := &report.Table{Columns: []string{"setup", "modules", "steady RSS MiB", "RSS right after start-up MiB", "peak RSS MiB", "watches held", "CPU s"}}
	one, three := bySetup(results)
	for _, runs := range [][]Result{one, three} {
		if len(runs) == 0 {
			continue
		}
		for i, p := range runs[0].Processes {
			proc := func(get func(ProcessResult) float64) string {
				return summarize(runs, func(r Result) float64 { return get(r.Processes[i]) }).Format(1)
			}
			t.Add(runs[0].Setup.Name, p.Modules,
				proc(func(p ProcessResult) float64 { return mib(p.RSS) }),
				proc(func(p ProcessResult) float64 { return mib(p.StartRSS) }),
				proc(func(p ProcessResult) float64 { return mib(p.Peak) }),
				proc(func(p ProcessResult) float64 {
					var s float64
					for _, v := range p.Watches {
						s += v
					}
					return s
				}),
				proc(func(p ProcessResult) float64 { return p.CPU.Seconds() }))
		}
	}
	return t
}

// WatchTable is the watches by resource of the last run of each setup, from
// each process and from the apiserver.
func WatchTable(results []Result) *report.Table {
	one, three := bySetup(results)
	if len(one) == 0 || len(three) == 0 {
		return &report.Table{Columns: []string{"resource"}}
	}
	a, b := one[len(one)-1], three[len(three)-1]
	cols := []string{"resource", "(a) " + a.Processes[0].Modules}
	for _, p := range b.Processes {
		cols = append(cols, "(b) "+p.Modules)
	}
	cols = append(cols, "apiserver, (a)", "apiserver, (b)")
	t := &report.Table{Columns: cols}
	for _, res := range resources([]Result{a, b}) {
		row := []string{res, fmt.Sprint(a.Processes[0].Watches[res])}
		for _, p := range b.Processes {
			row = append(row, fmt.Sprint(p.Watches[res]))
		}
		row = append(row, fmt.Sprint(a.APIServerWatches[res]), fmt.Sprint(b.APIServerWatches[res]))
		t.Add(row...)
	}
	return t
}

func writeText(w io.Writer, cfg Config, results []Result) error {
	fmt.Fprintf(w, "\n%d clusters × %d machines, median (min–max) of %d runs of each setup\n\n", cfg.Clusters, cfg.MachinesPerCluster, cfg.Runs)
	for _, t := range []*report.Table{SetupTable(results), TargetTable(results), ProcessTable(results), WatchTable(results)} {
		if err := t.WriteText(w); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	return nil
}

func writeMarkdown(w io.Writer, cfg Config, m harness.Machine, loaded Loaded, results []Result) error {
	fmt.Fprintf(w, "# Shared-cache benchmark results\n\n")
	fmt.Fprintf(w, "Made by `go run ./test/bench/sharedcache -clusters %d -per-namespace %d -machines %d -runs %d -idle %s`. Do not edit: run it again.\n\n",
		cfg.Clusters, cfg.PerNamespace, cfg.MachinesPerCluster, cfg.Runs, cfg.Idle)
	settings := &report.Table{Columns: []string{"setting", "value"}}
	settings.Add("date", m.Date.Format(time.RFC3339))
	settings.Add("machine", fmt.Sprintf("%s, %d CPUs (nproc)", m.Arch, m.CPUs))
	settings.Add("Go", m.GoVersion)
	settings.Add("commit", m.Commit)
	settings.Add("load average (1/5/15 min) at the start of each run", strings.Join(loaded.LoadAverage, "; "))
	settings.Add("objects", fmt.Sprintf("%d clusters in %d namespaces, each: Cluster (infrastructure provisioned), MonolithCluster (inMemory), "+
		"%d Machines and %d MonolithMachines claiming one address each from the namespace's MonolithIPPool, bootstrap and kubeconfig Secrets; "+
		"%d objects loaded in %s by an unthrottled client, then %d IPAddressClaims and %d IPAddresses made by the modules",
		cfg.Clusters, (cfg.Clusters+cfg.PerNamespace-1)/cfg.PerNamespace, cfg.MachinesPerCluster, cfg.MachinesPerCluster,
		loaded.Objects, loaded.Took.Round(time.Second), loaded.Machines, loaded.Machines))
	settings.Add("warm-up", fmt.Sprintf("one run of (a), discarded, in which the modules provisioned all %d machines (%s)", loaded.Machines, loaded.WarmUp.Round(time.Second)))
	settings.Add("setups", "(a) `--enable-modules=infra,machinepool,ipam,runtimeext`; (b) three processes, `--enable-modules=infra,machinepool`, `=ipam`, `=runtimeext`; "+
		"all with the binary's defaults otherwise (QPS 100, sync period 10 min), webhooks served, `--runtimeext-extension-config-name=` (no self-registration, which needs a Service)")
	settings.Add("process", "the `capi-monolith` binary (go build, CGO_ENABLED=0), one fresh process per setup and run; runs of (a) and (b) alternate")
	settings.Add("steady", "every process's workqueues empty and its reconcile count and open watches unchanged for 5 scrapes of /metrics a second apart")
	settings.Add("RSS right after start-up", fmt.Sprintf("mean of VmRSS read from /proc/<pid>/status once a second for %s, %s after steady: it still holds the start-up's garbage, "+
		"which Go hands back to the OS only after its next GC (in an idle process, the periodic one every 2 minutes)", cfg.Sample, cfg.Settle))
	settings.Add("steady RSS", fmt.Sprintf("the same, %s after steady (past the periodic GC); peak RSS is VmHWM at the end", cfg.Idle))
	settings.Add("watches held", "the process's `capi_monolith_api_watches_open` gauge, read from its secure diagnostics endpoint (`/metrics`, ServiceAccount token)")
	settings.Add("apiserver WATCH requests", "growth of kube-apiserver's `apiserver_longrunning_requests{verb=\"WATCH\"}` from before the setup started to the end of sampling")
	if err := settings.WriteMarkdown(w); err != nil {
		return err
	}
	for _, s := range []struct {
		title string
		t     *report.Table
	}{
		{"Setups: median (min–max)", SetupTable(results)},
		{"Target", TargetTable(results)},
		{"Processes: median (min–max)", ProcessTable(results)},
		{"Watches by resource, last run of each setup", WatchTable(results)},
	} {
		fmt.Fprintf(w, "\n## %s\n\n", s.title)
		if err := s.t.WriteMarkdown(w); err != nil {
			return err
		}
	}
	if loaded.HeapTop != "" {
		fmt.Fprintf(w, "\n## Heap of (a) in use at the end of its last run (/debug/pprof/heap, inuse_space)\n\n```\n%s\n```\n", loaded.HeapTop)
	}
	return nil
}
