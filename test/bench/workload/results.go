package main

import (
	"fmt"
	"io"
	"time"

	"github.com/capi-monolith/capi-monolith/test/bench/harness"
	"github.com/capi-monolith/capi-monolith/test/bench/harness/report"
)

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

func seconds(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }

func reached(d time.Duration) string {
	if d == 0 {
		return "not reached"
	}
	return seconds(d)
}

// summary is the headline table.
func summary(cfg Config, r Run) *report.Table {
	t := &report.Table{Columns: []string{"figure", "value"}}
	t.Add("clusters × (control plane + workers)", fmt.Sprintf("%d × (1 + %d) = %d machines", r.Clusters, cfg.Workers, r.Machines))
	t.Add("objects created (unthrottled client)", seconds(r.Created))
	if r.Orphaned > 0 {
		t.Add(fmt.Sprintf("every Machine Running with a nodeRef but %d orphaned by core's MachineSet (no MonolithMachine: they never run)", r.Orphaned), reached(r.MachinesRunning))
	} else {
		t.Add("every Machine Running with a nodeRef", reached(r.MachinesRunning))
	}
	t.Add("every KubeadmControlPlane Available", reached(r.ControlPlanesAvailable))
	if r.Incomplete != "" {
		t.Add("NOT DONE", r.Incomplete)
	}
	t.Add("Machines Running: p50 / p90 / p99", fmt.Sprintf("%s / %s / %s", seconds(r.Percentile(0.5)), seconds(r.Percentile(0.9)), seconds(r.Percentile(0.99))))
	t.Add("workload API listeners", fmt.Sprint(r.Endpoints))
	t.Add("capi-monolith peak RSS (VmHWM) when every machine ran", fmt.Sprintf("%.1f MiB", mib(r.End[PartMonolith].Memory.Peak)))
	t.Add("capi-monolith peak RSS before the clusters", fmt.Sprintf("%.1f MiB", mib(r.Start[PartMonolith].Memory.Peak)))
	t.Add("capi-monolith steady RSS before / after", fmt.Sprintf("%.1f / %.1f MiB", mib(r.Before[PartMonolith]), mib(r.After[PartMonolith])))
	t.Add("capi-monolith RSS per workload cluster", fmt.Sprintf("%.0f KiB", r.PerCluster(PartMonolith)/1024))
	all := uint64(0)
	for _, p := range Parts {
		all += r.End[p].Memory.Current
	}
	t.Add("every process of dev, RSS sum when all ran", fmt.Sprintf("%.1f MiB", mib(all)))
	t.Add("the machine's lowest MemAvailable while coming up", fmt.Sprintf("%.1f MiB", mib(r.LowestAvailable)))
	managers := uint64(0)
	for _, p := range []Part{PartCore, PartBootstrap, PartControlPlane} {
		managers += r.After[p]
	}
	t.Add("three Cluster API managers, steady RSS after (sum)", fmt.Sprintf("%.1f MiB", mib(managers)))
	return t
}

// perProcess is each part's memory and CPU.
func perProcess(r Run) *report.Table {
	wall := r.AllDone
	t := &report.Table{Columns: []string{"process", "steady RSS before (MiB)", "steady RSS after (MiB)", "per cluster (KiB)", "peak RSS when all ran (MiB)", "CPU while coming up (s)", "cores"}}
	for _, p := range Parts {
		cpu := r.End[p].CPU - r.Start[p].CPU
		t.Add(string(p),
			fmt.Sprintf("%.1f", mib(r.Before[p])), fmt.Sprintf("%.1f", mib(r.After[p])),
			fmt.Sprintf("%.0f", r.PerCluster(p)/1024), fmt.Sprintf("%.1f", mib(r.End[p].Memory.Peak)),
			fmt.Sprintf("%.1f", cpu.Seconds()), fmt.Sprintf("%.2f", cpu.Seconds()/wall.Seconds()))
	}
	return t
}

// stateTable is the persistence phase's figures.
func stateTable(r Run) *report.Table {
	s := r.State
	t := &report.Table{Columns: []string{"figure", "value"}}
	t.Add("objects written into every workload cluster", fmt.Sprintf("%d (in %s for all %d clusters)", s.AddonObjects, seconds(s.Written), r.Clusters))
	t.Add("capi-monolith RSS per workload cluster, kubeadm's objects only", fmt.Sprintf("%.0f KiB", r.PerCluster(PartMonolith)/1024))
	t.Add("capi-monolith RSS per workload cluster added by the addon set", fmt.Sprintf("%.0f KiB", s.AddonPerCluster(r.Result, PartMonolith)/1024))
	t.Add("journal bytes per cluster, kubeadm's objects only / with the addon set", fmt.Sprintf("%.0f / %.0f KiB",
		float64(s.JournalBefore)/1024/float64(r.Clusters), float64(s.JournalAfter)/1024/float64(r.Clusters)))
	t.Add("management-cluster writes per workload write", "0 (dev keeps workload objects in journal files, not in the management cluster)")
	t.Add("dev restarted (Ctrl-C, same --data-dir): ready", seconds(s.DevReady))
	t.Add("every cluster served again (addon object read back): p50 / p99 / last", fmt.Sprintf("%s / %s / %s",
		seconds(s.ServedAgainPercentile(0.5)), seconds(s.ServedAgainPercentile(0.99)), seconds(s.ServedAgainPercentile(1))))
	return t
}

func writeText(w io.Writer, cfg Config, r Run) error {
	fmt.Fprintf(w, "\nworkload clusters from capi-monolith dev (load %s → %s)\n\n", r.LoadBefore, r.LoadAfter)
	if err := summary(cfg, r).WriteText(w); err != nil {
		return err
	}
	fmt.Fprintln(w)
	if err := perProcess(r).WriteText(w); err != nil {
		return err
	}
	fmt.Fprintln(w)
	if err := milestonesTable([]string{"this run"}, []Milestones{r.Milestones}).WriteText(w); err != nil {
		return err
	}
	if r.Runtime != nil {
		fmt.Fprintln(w)
		if err := runtimeTable(r.Runtime[0], r.Runtime[1], r.Clusters).WriteText(w); err != nil {
			return err
		}
	}
	if r.HeapTop != "" {
		fmt.Fprintf(w, "\n## capi-monolith's heap in use once every machine ran (-heap-profile, pprof -top, inuse_space)\n\n```\n%s\n```\n", r.HeapTop)
	}
	writeCPUProfiles(w, "## "+cpuProfilesTitle, r.CPUProfiles, false)
	if r.State == nil {
		return nil
	}
	fmt.Fprintln(w, "\nstate across a restart of dev --data-dir")
	fmt.Fprintln(w)
	return stateTable(r).WriteText(w)
}

func writeMarkdown(w io.Writer, cfg Config, m harness.Machine, r Run) error {
	fmt.Fprintf(w, "# Workload clusters from `capi-monolith dev` (`make bench-workload`)\n\n")
	fmt.Fprintf(w, "%s, %s, %d CPUs, %s, commit %s. Load average (1/5/15 min) %s when dev was ready, %s when every machine ran.\n\n",
		m.Date.Format("2006-01-02 15:04 UTC"), m.Arch, m.CPUs, m.GoVersion, m.Commit, r.LoadBefore, r.LoadAfter)
	fmt.Fprintf(w, "%d clusters created at once in namespace `%s`, each a KubeadmControlPlane of 1 machine and a MachineDeployment of %d workers (KubeadmConfigTemplate), Kubernetes %s, inMemory backend with %s provisioning and %s bootstrap per machine; created by %d goroutines through a client with no client-side rate limit. Dev's own flags: %q. One run.\n\n",
		r.Clusters, cfg.Namespace, cfg.Workers, cfg.KubernetesVersion, cfg.ProvisioningDelay, cfg.BootstrapDelay, cfg.Concurrency, cfg.DevArgs)
	fmt.Fprintf(w, "Times are from the first create, read from a watch of the Machines and KubeadmControlPlanes every %s, exact to within that poll. Steady RSS is the mean VmRSS over %s, read %s after dev was ready (before) and %s after every machine ran (after); per cluster = (after − before) / %d.\n\n",
		cfg.Poll, cfg.Window, cfg.Settle, cfg.Settle, r.Clusters)
	if r.OutOfMemory {
		fmt.Fprintf(w, "**The run was ended because the machine ran short of memory** (MemAvailable below %.0f MiB, `-min-available`): \"after\" is one reading at that moment, not a steady mean, and per cluster divides it by all %d clusters, though not all had come up.\n\n",
			mib(cfg.MinAvailable), r.Clusters)
	}
	if err := summary(cfg, r).WriteMarkdown(w); err != nil {
		return err
	}
	fmt.Fprintln(w)
	if err := perProcess(r).WriteMarkdown(w); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nCPU and cores are from the first create until every machine ran (%s).\n\n", seconds(r.AllDone))
	fmt.Fprintf(w, "When the Machines and control planes passed each step on their way up, p50 / p99 from the first create (creation from the objects' timestamps, every other step from the poll that first saw it):\n\n")
	if err := milestonesTable([]string{"this run"}, []Milestones{r.Milestones}).WriteMarkdown(w); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nProgress, every 30 s:\n\n")
	for _, line := range r.Progress {
		fmt.Fprintf(w, "- %s\n", line)
	}
	if len(r.Stuck) > 0 {
		fmt.Fprintf(w, "\nMachines not Running when the wait ended:\n\n")
		for _, line := range r.Stuck {
			fmt.Fprintf(w, "- %s\n", line)
		}
	}
	if r.Runtime != nil {
		fmt.Fprintf(w, "\n## Where capi-monolith's memory is (`-heap-profile`)\n\nThe Go runtime's gauges from the process's /metrics, read when dev was ready and once every machine ran (after the profile's settle); heap in use counts garbage not yet collected, stacks are not in a heap profile.\n\n")
		if err := runtimeTable(r.Runtime[0], r.Runtime[1], r.Clusters).WriteMarkdown(w); err != nil {
			return err
		}
		fmt.Fprintf(w, "\nHeap in use once every machine ran (pprof -top, inuse_space):\n\n```\n%s\n```\n", r.HeapTop)
	}
	writeCPUProfiles(w, "## "+cpuProfilesTitle, r.CPUProfiles, true)
	if r.State == nil {
		return nil
	}
	fmt.Fprintf(w, "\n## State across a restart of `dev --data-dir`\n\nOnce every machine ran, %d objects (a namespace, then ServiceAccounts, 1 KiB ConfigMaps and Secrets, Roles and RoleBindings) were written into every workload cluster through its workload API by %d goroutines; steady RSS was read again (%s after, for %s), the journals in dev's state folder measured, and dev stopped with Ctrl-C and started again on the same `--data-dir`. A cluster counts as served again when one of its addon ConfigMaps is read back through its workload API (polled every 100 ms); times are from the restart.\n\n",
		r.State.AddonObjects, cfg.Concurrency, cfg.Settle, cfg.Window)
	return stateTable(r).WriteMarkdown(w)
}
