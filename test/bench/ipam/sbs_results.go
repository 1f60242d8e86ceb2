package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/capi-monolith/capi-monolith/test/bench/harness/report"
)

// sbsRow is the median of one side's runs of one phase.
type sbsRow struct {
	rate, share, apiserver, etcd, controller, writes, rawU report.Summary
	duplicates                                             int
	// timedOut names the runs whose phase ended at its bound: their rate
	// is a bound, not a measure of the whole phase.
	timedOut []string
}

// sbsPhaseKey names a phase: N from an empty pool, or M into a pool of N.
func sbsPhaseKey(n, marginal int, isMarginal bool) string {
	if isMarginal {
		return fmt.Sprintf("%d more into a pool holding %d", marginal, n)
	}
	return fmt.Sprintf("%d from an empty /16", n)
}

func (r *SBSResults) summarize(side string, n int, marginal bool) (sbsRow, bool) {
	var rate, share, apiserver, etcd, controller, writesPC, rawU []float64
	row := sbsRow{}
	for _, run := range r.Runs {
		if run.Side != side || run.N != n {
			continue
		}
		p := run.Empty
		if marginal {
			if run.Marginal == nil {
				continue
			}
			p = *run.Marginal
		}
		if p.TimedOut {
			row.timedOut = append(row.timedOut, fmt.Sprintf("%d of %d fulfilled within %s s", p.Fulfilled, p.Claims, seconds(p.Wall)))
		}
		rate = append(rate, p.Rate)
		share = append(share, p.Rate/run.RawUnthrottled)
		apiserver = append(apiserver, p.perClaim(p.APIServerCPU))
		etcd = append(etcd, p.perClaim(p.EtcdCPU))
		controller = append(controller, p.perClaim(p.ControllerCPU))
		writesPC = append(writesPC, p.Writes)
		rawU = append(rawU, run.RawUnthrottled)
		row.duplicates += run.Duplicates
	}
	if len(rate) == 0 {
		return row, false
	}
	row.rate, row.share, row.apiserver = report.Summarize(rate), report.Summarize(share), report.Summarize(apiserver)
	row.etcd, row.controller, row.writes, row.rawU = report.Summarize(etcd), report.Summarize(controller), report.Summarize(writesPC), report.Summarize(rawU)
	return row, true
}

// rateCell is the median rate, with the runs cut short at the phase's
// bound named.
func (r sbsRow) rateCell() string {
	if len(r.timedOut) == 0 {
		return r.rate.Format(1)
	}
	return fmt.Sprintf("%s (timed out: %s)", r.rate.Format(1), strings.Join(r.timedOut, ", "))
}

// ratioCell is ours over the peer's median rate; a side cut short makes it
// a bound, or none when the peer fulfilled nothing.
func ratioCell(ours, peer sbsRow) string {
	switch {
	case len(ours.timedOut) > 0 && len(peer.timedOut) > 0:
		return "– (both timed out)"
	case len(peer.timedOut) > 0 && peer.rate.Median == 0:
		return "∞ (the peer fulfilled none)"
	case len(peer.timedOut) > 0:
		return fmt.Sprintf("≥ %.2f×", ours.rate.Median/peer.rate.Median)
	case len(ours.timedOut) > 0:
		return fmt.Sprintf("≤ %.2f×", ours.rate.Median/peer.rate.Median)
	}
	return fmt.Sprintf("%.2f×", ours.rate.Median/peer.rate.Median)
}

// figures is the side-by-side table: one row per phase, ours beside the
// peer's.
func (r *SBSResults) figures() *report.Table {
	t := &report.Table{Columns: []string{
		"claims", "runs", "claims/s ours", "claims/s peer", "ours/peer",
		"kube-apiserver CPU ms/claim ours", "peer", "etcd CPU ms/claim ours", "peer",
		"controller CPU ms/claim ours", "peer", "writes/claim ours", "peer",
		"(a′) raw creates/s ours", "peer", "claims/s ÷ (a′) ours", "peer", "duplicates ours", "peer",
	}}
	for _, n := range r.Config.Sizes {
		for _, marginal := range []bool{false, true} {
			ours, ok1 := r.summarize(sideOurs, n, marginal)
			peer, ok2 := r.summarize(sidePeer, n, marginal)
			if !ok1 || !ok2 {
				continue
			}
			t.Add(sbsPhaseKey(n, r.Config.Marginal, marginal), strconv.Itoa(ours.rate.Runs),
				ours.rateCell(), peer.rateCell(), ratioCell(ours, peer),
				ours.apiserver.Format(1), peer.apiserver.Format(1), ours.etcd.Format(1), peer.etcd.Format(1),
				ours.controller.Format(1), peer.controller.Format(1), ours.writes.Format(2), peer.writes.Format(2),
				ours.rawU.Format(0), peer.rawU.Format(0), ours.share.Format(3), peer.share.Format(3),
				strconv.Itoa(ours.duplicates), strconv.Itoa(peer.duplicates))
		}
	}
	return t
}

// runs lists every run in the order made, so that the alternation shows.
func (r *SBSResults) runs() *report.Table {
	t := &report.Table{Columns: []string{
		"run", "side", "N", "(a′)/s", "claims/s from empty", "s", "apiserver ms/claim", "writes/claim",
		"claims/s, marginal", "s", "apiserver ms/claim", "writes/claim", "addresses", "duplicates", "load average at end", "problems",
	}}
	for i, run := range r.Runs {
		e := run.Empty
		row := []string{strconv.Itoa(i + 1), run.Side, strconv.Itoa(run.N), fmt.Sprintf("%.0f", run.RawUnthrottled),
			fmt.Sprintf("%.1f", e.Rate), seconds(e.Wall), fmt.Sprintf("%.1f", e.perClaim(e.APIServerCPU)), fmt.Sprintf("%.2f", e.Writes)}
		if m := run.Marginal; m != nil {
			rate := fmt.Sprintf("%.1f", m.Rate)
			if m.TimedOut {
				rate = fmt.Sprintf("%d of %d fulfilled, timed out", m.Fulfilled, m.Claims)
			}
			row = append(row, rate, seconds(m.Wall), fmt.Sprintf("%.1f", m.perClaim(m.APIServerCPU)), fmt.Sprintf("%.2f", m.Writes))
		} else {
			row = append(row, "–", "–", "–", "–")
		}
		row = append(row, strconv.Itoa(run.Addresses), strconv.Itoa(run.Duplicates), run.LoadAverage, strings.Join(run.Problems, "; "))
		t.Add(row...)
	}
	return t
}

// restarts lists the restart and take-over of every run that made them.
func (r *SBSResults) restarts() *report.Table {
	t := &report.Table{Columns: []string{
		"run", "side", "bound claims", "previous process stopped", "restart: /readyz s", "new claim fulfilled s", "backlog reconciled s",
		"writes", "controller CPU s", "kube-apiserver CPU s", "load average",
		"take-over: claims", "previous process stopped", "into a pool holding", "/readyz s", "all fulfilled s", "claims/s", "writes/claim",
		"controller CPU ms/claim", "kube-apiserver CPU ms/claim", "load average",
	}}
	for i, run := range r.Runs {
		rs, to := run.Restart, run.TakeOver
		if rs == nil || to == nil {
			continue
		}
		backlog := seconds(rs.Backlog)
		if rs.BacklogProblem != "" {
			backlog = "not measured: " + rs.BacklogProblem
		}
		perClaim := func(d time.Duration) string {
			return fmt.Sprintf("%.1f", float64(d.Microseconds())/1000/float64(to.Claims))
		}
		t.Add(strconv.Itoa(i+1), run.Side, strconv.Itoa(rs.Bound), rs.Stopped, seconds(rs.Ready), seconds(rs.NewClaim), backlog,
			fmt.Sprintf("%.0f", rs.Writes), seconds(rs.ControllerCPU), seconds(rs.APIServerCPU), rs.LoadAverage,
			strconv.Itoa(to.Claims), to.Stopped, strconv.Itoa(to.Fill), seconds(to.Ready), seconds(to.Wall), fmt.Sprintf("%.1f", to.Rate()),
			fmt.Sprintf("%.2f", to.Writes), perClaim(to.ControllerCPU), perClaim(to.APIServerCPU), to.LoadAverage)
	}
	return t
}

func (r *SBSResults) hasRestarts() bool {
	for _, run := range r.Runs {
		if run.Restart != nil {
			return true
		}
	}
	return false
}

func (r *SBSResults) settings() [][2]string {
	c, m := r.Config, r.Machine
	warmup := "none"
	if c.Warmup > 0 {
		warmup = fmt.Sprintf("one run of each side with N=%d before measuring, discarded", c.Warmup)
	}
	marginal := "not measured (-marginal 0)"
	if c.Marginal > 0 {
		marginal = fmt.Sprintf("after the N claims are all fulfilled, %d more claims into the same pool (then holding N addresses), timed alone", c.Marginal)
		if c.MarginalTimeout > 0 {
			marginal += fmt.Sprintf(", for at most %s (a side still short then is recorded with how many it fulfilled; its rate is then that number over %s)", c.MarginalTimeout, c.MarginalTimeout)
		}
	}
	restart := "not measured (no -restart)"
	if c.Restart {
		restart = "after the N (and marginal) claims are fulfilled the side's process gets SIGTERM and, once it has exited, a fresh one starts (times from its exec): /readyz = its readiness endpoint answers 200; new claim = one claim created as soon as /readyz answered has status.addressRef; backlog = its ipaddressclaim controller has made at least (bound claims + 1) reconciles (controller_runtime_reconcile_total) and its workqueue_depth is 0, read every 200 ms from its metrics; writes = every write to the ipam.cluster.x-k8s.io group from its start to the end of the later of those, the new claim's own writes included (about 3 for ours), the feed's create not. Take-over: the process is stopped again, N claims are created while none runs, then a fresh process starts; all fulfilled = a watch has seen every one of them with status.addressRef"
	}
	return [][2]string{
		{"date", m.Date.Format(time.RFC3339)},
		{"machine", fmt.Sprintf("%s, %d CPUs (nproc)", m.Arch, m.CPUs)},
		{"Go", m.GoVersion},
		{"commit, ours", m.Commit},
		{"commit, peer", fmt.Sprintf("%s (HEAD of %s)", r.PeerCommit, r.PeerSrc)},
		{"load average (1/5/15 min)", fmt.Sprintf("before the measured runs %s, after %s (the machine is shared with other test runs)", r.LoadBefore, r.LoadAfter)},
		{"ours", fmt.Sprintf("the capi-monolith binary (go build, CGO_ENABLED=0) as a process: `%s`; every other flag at its default (--kube-api-qps=100 --kube-api-burst=200 --ipam-concurrency=10)", strings.Join(r.OurArgs, " "))},
		{"peer", fmt.Sprintf("sigs.k8s.io/cluster-api-ipam-provider-in-cluster built with go build in a scratch folder, as a process: `%s`; every other flag at its default (controller-runtime's client with no client-side rate limit, one claim reconcile at a time); its webhook server serves a certificate made by the benchmark and is not called, as ours", strings.Join(r.PeerArgs, " "))},
		{"apiserver", "one envtest kube-apiserver and etcd for both sides; the sides alternate, ours first; each run has a fresh namespace, pool and process, and its objects are deleted after it"},
		{"pool", fmt.Sprintf("%s prefix %d (MonolithIPPool for ours, InClusterIPPool for the peer)", poolCIDR, poolPrefix)},
		{"claims", fmt.Sprintf("created by %d goroutines with an unthrottled client; fulfilled = a watch sees status.addressRef set (the peer sets no Ready condition); rate = claims / (first create to last fulfilment)", c.CreateWorkers)},
		{"marginal", marginal},
		{"(a′)", fmt.Sprintf("%d IPAddresses created by %d goroutines with an unthrottled client just before each run, then deleted", c.RawObjects, rawUnthrottledWorkers)},
		{"CPU", "user+system CPU time of kube-apiserver, etcd and the side's process over the phase, from /proc/<pid>/stat, per claim"},
		{"writes/claim", "kube-apiserver's apiserver_request_total for POST, PUT, PATCH, DELETE and APPLY in the ipam.cluster.x-k8s.io group over the phase, less the feeding client's creates, per claim"},
		{"runs", fmt.Sprintf("median of %d runs per side and size, (min–max)", c.Runs)},
		{"warm-up", warmup},
		{"restart", restart},
		{"sides", strings.Join(c.Sides, ", ")},
	}
}

// WriteText prints the figures for the terminal.
func (r *SBSResults) WriteText(w io.Writer) error {
	var b strings.Builder
	for _, s := range r.settings() {
		fmt.Fprintf(&b, "%-26s %s\n", s[0]+":", s[1])
	}
	b.WriteString("\nSide by side (median (min–max))\n")
	if err := r.figures().WriteText(&b); err != nil {
		return err
	}
	b.WriteString("\nRuns, in the order made\n")
	if err := r.runs().WriteText(&b); err != nil {
		return err
	}
	if r.hasRestarts() {
		b.WriteString("\nRestart and take-over, in the order made\n")
		if err := r.restarts().WriteText(&b); err != nil {
			return err
		}
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("failed to write the results: %w", err)
	}
	return nil
}

// WriteMarkdown writes the results file.
func (r *SBSResults) WriteMarkdown(w io.Writer, command string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# IPAM side by side: capi-monolith and the in-cluster IPAM provider\n\nMade by `%s`. Do not edit: run it again.\n\n", command)
	b.WriteString("| setting | value |\n| --- | --- |\n")
	for _, s := range r.settings() {
		fmt.Fprintf(&b, "| %s | %s |\n", s[0], strings.ReplaceAll(s[1], "|", `\|`))
	}
	b.WriteString("\n## Side by side: median (min–max)\n\n")
	if err := r.figures().WriteMarkdown(&b); err != nil {
		return err
	}
	b.WriteString("\n## Runs, in the order made\n\n")
	if err := r.runs().WriteMarkdown(&b); err != nil {
		return err
	}
	if r.hasRestarts() {
		b.WriteString("\n## Restart and take-over, in the order made\n\n")
		if err := r.restarts().WriteMarkdown(&b); err != nil {
			return err
		}
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("failed to write the results: %w", err)
	}
	return nil
}
