package main

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/capi-monolith/capi-monolith/test/bench/harness"
	"github.com/capi-monolith/capi-monolith/test/bench/harness/report"
)

// otherParts are the processes of dev that are not the provider on either
// side; on the peer's side capi-monolith (its ipam module idle) joins them.
var otherParts = []Part{PartCore, PartBootstrap, PartControlPlane, PartAPIServer, PartEtcd}

// cpu is the CPU part used from the first create until every machine ran.
func (r Result) cpu(part Part) time.Duration { return r.End[part].CPU - r.Start[part].CPU }

// perMachine divides by the machines that ran, or all of them when none
// did (a run ended early).
func (r Result) perMachine(v float64) float64 {
	n := len(r.Running)
	if n == 0 {
		n = r.Machines
	}
	return v / float64(n)
}

// sbsTable has one column per run, the sides alternating.
func (s *SBS) sbsTable() *report.Table {
	cols := []string{"figure"}
	for i, r := range s.Runs {
		cols = append(cols, fmt.Sprintf("%s #%d", r.Side, i/2+1))
	}
	t := &report.Table{Columns: cols}
	row := func(name string, f func(r SideRun) string) {
		cells := []string{name}
		for _, r := range s.Runs {
			cells = append(cells, f(r))
		}
		t.Add(cells...)
	}
	row("machines (clusters × 4)", func(r SideRun) string { return fmt.Sprint(r.Machines) })
	row("every KubeadmControlPlane Available", func(r SideRun) string { return reached(r.ControlPlanesAvailable) })
	row("every Machine Running with a nodeRef", func(r SideRun) string {
		if r.Orphaned > 0 {
			return fmt.Sprintf("%s (%d orphaned)", reached(r.MachinesRunning), r.Orphaned)
		}
		return reached(r.MachinesRunning)
	})
	row("Machine Running p50 / p99", func(r SideRun) string {
		return fmt.Sprintf("%s / %s", seconds(r.Percentile(0.5)), seconds(r.Percentile(0.99)))
	})
	row("kube-apiserver requests per Machine (writes)", func(r SideRun) string {
		return fmt.Sprintf("%.0f (%.0f)", r.perMachine(r.Requests), r.perMachine(r.Writes))
	})
	row("kube-apiserver CPU per Machine", func(r SideRun) string {
		return fmt.Sprintf("%.0f ms", r.perMachine(float64(r.cpu(PartAPIServer).Milliseconds())))
	})
	row("provider process", func(r SideRun) string { return string(r.Provider) })
	row("provider CPU (per Machine)", func(r SideRun) string {
		c := r.cpu(r.Provider)
		return fmt.Sprintf("%.1f s (%.0f ms)", c.Seconds(), r.perMachine(float64(c.Milliseconds())))
	})
	row("provider steady RSS before / after", func(r SideRun) string {
		return fmt.Sprintf("%.1f / %.1f MiB", mib(r.Before[r.Provider]), mib(r.After[r.Provider]))
	})
	row("provider steady RSS per workload cluster", func(r SideRun) string {
		return fmt.Sprintf("%.0f KiB", r.PerCluster(r.Provider)/1024)
	})
	for _, p := range otherParts {
		row(string(p)+" CPU", func(r SideRun) string { return seconds(r.cpu(p)) })
	}
	row("capi-monolith CPU when not the provider (ipam module only)", func(r SideRun) string {
		if r.Provider == PartMonolith {
			return "—"
		}
		return seconds(r.cpu(PartMonolith))
	})
	row("Cluster API managers' CPU (core + bootstrap + control plane)", func(r SideRun) string {
		return seconds(r.cpu(PartCore) + r.cpu(PartBootstrap) + r.cpu(PartControlPlane))
	})
	row("load average when dev was ready → all ran", func(r SideRun) string {
		return r.LoadBefore + " → " + r.LoadAfter
	})
	return t
}

// problems says which runs did not finish.
func (s *SBS) problems() []string {
	var out []string
	for i, r := range s.Runs {
		if r.Incomplete != "" {
			out = append(out, fmt.Sprintf("run %d (%s) not done %s", i+1, r.Side, r.Incomplete))
		}
		if r.OutOfMemory {
			out = append(out, fmt.Sprintf("run %d (%s) ended short of memory", i+1, r.Side))
		}
		for _, line := range r.Stuck {
			out = append(out, fmt.Sprintf("run %d (%s): %s", i+1, r.Side, line))
		}
	}
	return out
}

func (s *SBS) writeText(w io.Writer) error {
	fmt.Fprintf(w, "\nworkload clusters side by side: ours against %s\n\n", s.PeerCommit)
	if err := s.sbsTable().WriteText(w); err != nil {
		return err
	}
	fmt.Fprintln(w)
	if err := s.milestonesTable().WriteText(w); err != nil {
		return err
	}
	fmt.Fprintln(w)
	if err := s.requestsTable().WriteText(w); err != nil {
		return err
	}
	fmt.Fprintln(w)
	if err := s.changesTable().WriteText(w); err != nil {
		return err
	}
	for _, p := range s.problems() {
		fmt.Fprintln(w, p)
	}
	for i, r := range s.Runs {
		writeCPUProfiles(w, fmt.Sprintf("## run %d, %s: %s", i+1, r.Side, cpuProfilesTitle), r.CPUProfiles, false)
	}
	return nil
}

func (s *SBS) writeMarkdown(w io.Writer, cfg Config, m harness.Machine) error {
	fmt.Fprintf(w, "# Workload clusters side by side (`make bench-workload-sbs`)\n\n")
	fmt.Fprintf(w, "%s, %s, %d CPUs, %s, commit %s; peer %s (`%s`, its DevCluster and DevMachine kinds with the inMemory backend), built from test/capie2e's pins.\n\n",
		m.Date.Format("2006-01-02 15:04 UTC"), m.Arch, m.CPUs, m.GoVersion, m.Commit, s.PeerCommit, peerPackage)
	fmt.Fprintf(w, "Each run is a fresh `capi-monolith dev` (same flags: %q, plus `--enable-modules=infra` for ours and `--enable-modules=ipam` for the peer's, so that it is the only infrastructure provider; the peer runs as a process beside dev with dev's admin kubeconfig, POD_IP=127.0.0.1, its webhooks served but not registered). %d clusters created at once, each a KubeadmControlPlane of 1 machine and a MachineDeployment of %d workers, Kubernetes %s; the same objects on both sides but for the infrastructure kinds, whose simulated provisioning is %s and bootstrap (the peer's node startup) %s per machine, no jitter. Sides alternate, ours first. Times are from the first create, exact to within %s. Requests are kube-apiserver's apiserver_request_total from the first create until every machine ran; CPU likewise. Steady RSS is the mean VmRSS over %s, %s after dev was ready and after every machine ran.\n\n",
		cfg.DevArgs, cfg.Clusters, cfg.Workers, cfg.KubernetesVersion, cfg.ProvisioningDelay, cfg.BootstrapDelay, cfg.Poll, cfg.Window, cfg.Settle)
	if err := s.sbsTable().WriteMarkdown(w); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nWhen the Machines and control planes passed each step on their way up, p50 / p99 from the first create (creation from the objects' timestamps, every other step from the poll that first saw it):\n\n")
	if err := s.milestonesTable().WriteMarkdown(w); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nThe same requests by verb and resource (subresource after the slash), per Machine:\n\n")
	if err := s.requestsTable().WriteMarkdown(w); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nThe changes the benchmark's watch saw, per Machine, by kind and what changed (spec: a new generation; metadata: labels, annotations, finalizers, owner references; a status field by name, a condition by type when its status, reason, message or observed generation changed; one change may count under several):\n\n")
	if err := s.changesTable().WriteMarkdown(w); err != nil {
		return err
	}
	if p := s.problems(); len(p) > 0 {
		fmt.Fprintf(w, "\n- %s\n", strings.Join(p, "\n- "))
	}
	for i, r := range s.Runs {
		writeCPUProfiles(w, fmt.Sprintf("## Run %d, %s: %s", i+1, r.Side, cpuProfilesTitle), r.CPUProfiles, true)
	}
	return nil
}

// milestonesTable has one column per run, the sides alternating.
func (s *SBS) milestonesTable() *report.Table {
	var names []string
	var runs []Milestones
	for i, r := range s.Runs {
		names = append(names, fmt.Sprintf("%s #%d", r.Side, i/2+1))
		runs = append(runs, r.Milestones)
	}
	return milestonesTable(names, runs)
}

// requestsTable is kube-apiserver's requests per Machine by verb and
// resource, one column per run.
func (s *SBS) requestsTable() *report.Table {
	return s.perMachineTable("kube-apiserver requests per Machine", func(r SideRun) map[string]float64 { return r.RequestsByKind })
}

// changesTable is the watched objects' changes per Machine by kind and
// what changed, one column per run.
func (s *SBS) changesTable() *report.Table {
	return s.perMachineTable("changes seen per Machine", func(r SideRun) map[string]float64 { return r.Changes })
}

// perMachineTable has the counts of each key per Machine, one column per
// run: the keys of which some run had at least one per two Machines, most
// first, at most 30 rows.
func (s *SBS) perMachineTable(title string, counts func(SideRun) map[string]float64) *report.Table {
	cols := []string{title}
	for i, r := range s.Runs {
		cols = append(cols, fmt.Sprintf("%s #%d", r.Side, i/2+1))
	}
	t := &report.Table{Columns: cols}
	most := map[string]float64{}
	for _, r := range s.Runs {
		for k, v := range counts(r) {
			most[k] = max(most[k], r.perMachine(v))
		}
	}
	var keys []string
	for k, v := range most {
		if v >= 0.5 {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b string) int {
		if c := cmp.Compare(most[b], most[a]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	for _, k := range keys[:min(len(keys), 30)] {
		cells := []string{k}
		for _, r := range s.Runs {
			cells = append(cells, fmt.Sprintf("%.1f", r.perMachine(counts(r)[k])))
		}
		t.Add(cells...)
	}
	return t
}
