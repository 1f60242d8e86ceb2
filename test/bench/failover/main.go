// Command failover is the replicas benchmark (`make bench-failover`): issue
// 29's failover time and the installed design's cost, at many clusters.
// Against one envtest apiserver it runs two capi-monolith processes (infra
// module, inMemory workload clusters, --inmemory-workload-state=secrets,
// --inmemory-workload-leader-lease, the bundle's leader election: lease 8 s,
// renew 6 s, retry 1 s) on 127.0.0.2 and 127.0.0.3, standing for two pods;
// makes -clusters clusters (Cluster, inMemory MonolithCluster, the cluster
// certificates and admin kubeconfig; no Machines) and writes -objects
// ConfigMaps through each workload API. It prints the management-cluster
// objects the design makes (state Secrets and their bytes, Leases,
// Services), the listening sockets and RSS of each replica, then SIGKILLs
// the leader and times, from the kill, the new leader's election, its
// publishing itself (once it loaded every cluster), and every cluster's
// workload API answering through the survivor (dialled with the cluster's
// kubeconfig client certificate), and counts the objects lost (missing or
// with another uid).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"

	infrav1 "github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/test/bench/harness"
	"github.com/capi-monolith/capi-monolith/test/bench/harness/report"
)

const defaultOut = "test/bench/results/failover.md"

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "bench-failover:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	cfg := DefaultConfig()
	sizes := harness.Ints{100, 1000}
	fs := flag.NewFlagSet("bench-failover", flag.ContinueOnError)
	fs.Var(&sizes, "clusters", "comma-separated numbers of workload clusters, one run each")
	fs.IntVar(&cfg.Objects, "objects", cfg.Objects, "ConfigMaps written through each workload API")
	fs.IntVar(&cfg.Workers, "workers", cfg.Workers, "clusters made in parallel")
	fs.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "bound of every wait")
	out := fs.String("out", defaultOut, "Markdown results file; empty writes none")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctrl.SetLogger(logr.Discard())
	ctx := context.Background()
	machine := harness.DescribeMachine(ctx)
	var results []Result
	for _, n := range sizes {
		c := cfg
		c.Clusters = n
		fmt.Fprintf(os.Stderr, "%d clusters (load %s)\n", n, harness.LoadAverage())
		r, err := measureFresh(ctx, c)
		if err != nil {
			return fmt.Errorf("at %d clusters: %w", n, err)
		}
		results = append(results, r)
		if err := Table(results).WriteText(os.Stdout); err != nil {
			return err
		}
		// Write after every size: a larger one may not finish.
		if *out != "" {
			if err := report.WriteFile(*out, func(w io.Writer) error { return writeMarkdown(w, cfg, machine, results) }); err != nil {
				return err
			}
		}
	}
	return nil
}

// measureFresh runs Measure against its own apiserver, so that sizes do not
// share one's objects.
func measureFresh(ctx context.Context, cfg Config) (Result, error) {
	env, err := harness.StartEnvironment(ctx, harness.EnvOptions{
		AddToScheme: []func(*runtime.Scheme) error{infrav1.AddToScheme},
		CRDDirs:     []string{"manifests/infra/crd"},
	})
	if err != nil {
		return Result{}, err
	}
	defer env.Stop()
	return Measure(ctx, env, cfg)
}

// Table is one column per size.
func Table(results []Result) *report.Table {
	t := &report.Table{Columns: []string{"measure"}}
	for _, r := range results {
		t.Columns = append(t.Columns, fmt.Sprintf("%d clusters", r.Clusters))
	}
	row := func(name string, cell func(Result) string) {
		cells := []string{name}
		for _, r := range results {
			cells = append(cells, cell(r))
		}
		t.Add(cells...)
	}
	per := func(v, n int) string { return fmt.Sprintf("%d (%.2f per cluster)", v, float64(v)/float64(n)) }
	mib := func(b uint64) string { return fmt.Sprintf("%.1f", float64(b)/(1<<20)) }
	sec := func(d time.Duration) string { return fmt.Sprintf("%.2f", d.Seconds()) }
	row("user objects per cluster (ConfigMaps)", func(r Result) string { return fmt.Sprint(r.Objects) })
	row("state Secrets", func(r Result) string { return per(r.StateSecrets, r.Clusters) })
	row("state Secrets' data (KiB)", func(r Result) string {
		return fmt.Sprintf("%.0f (%.1f per cluster)", float64(r.StateBytes)/1024, float64(r.StateBytes)/1024/float64(r.Clusters))
	})
	row("Leases in the namespace", func(r Result) string { return fmt.Sprint(r.Leases) })
	row("Services in the namespace", func(r Result) string { return fmt.Sprint(r.Services) })
	row("listening sockets, leader / follower", func(r Result) string {
		return fmt.Sprintf("%d / %d", r.ListeningLeader, r.ListeningFollower)
	})
	row("RSS leader / follower (MiB)", func(r Result) string { return mib(r.RSSLeader) + " / " + mib(r.RSSFollower) })
	row("RSS leader per cluster (KiB)", func(r Result) string {
		return fmt.Sprintf("%.0f", float64(r.RSSLeader)/1024/float64(r.Clusters))
	})
	row("survivor RSS after takeover (MiB)", func(r Result) string { return mib(r.RSSAfter) })
	row("load average before the kill", func(r Result) string { return r.Load })
	row("kill → new leader elected (s)", func(r Result) string { return sec(r.Elected) })
	row("kill → survivor published (every cluster loaded) (s)", func(r Result) string { return sec(r.Published) })
	row("elected → published: loading every cluster (s)", func(r Result) string { return sec(r.Published - r.Elected) })
	row("kill → cluster answers with every object p50 / p99 / last (s)", func(r Result) string {
		a := slices.Sorted(slices.Values(r.Answered))
		return sec(quantile(a, 0.5)) + " / " + sec(quantile(a, 0.99)) + " / " + sec(a[len(a)-1])
	})
	row("objects lost (missing or another uid)", func(r Result) string { return fmt.Sprint(r.Lost) })
	return t
}

func quantile(sorted []time.Duration, q float64) time.Duration {
	i := int(q*float64(len(sorted)) + 0.5)
	return sorted[max(0, min(len(sorted)-1, i-1))]
}

func writeMarkdown(w io.Writer, cfg Config, m harness.Machine, results []Result) error {
	fmt.Fprintf(w, "# bench-failover\n\n")
	fmt.Fprintf(w, "`make bench-failover` on %s, %s, %d CPUs, %s, commit %s. One run per size.\n\n",
		m.Date.Format(time.RFC3339), m.Arch, m.CPUs, m.GoVersion, m.Commit)
	sizes := make([]string, len(results))
	for i, r := range results {
		sizes[i] = fmt.Sprint(r.Clusters)
	}
	fmt.Fprintf(w, "Two capi-monolith processes (infra module; `--inmemory-workload-state=secrets`, "+
		"`--inmemory-workload-leader-lease`, advertised host, leader election lease 8 s, renew 6 s, retry 1 s as the bundle sets) "+
		"on 127.0.0.2 and 127.0.0.3 against one envtest kube-apiserver, all on this machine. Sizes: %s inMemory workload clusters "+
		"(Cluster, MonolithCluster, certificates and admin kubeconfig; no Machines, so no Nodes or kubeadm objects in the stores), "+
		"%d ConfigMaps written through each workload API. Then the leader is SIGKILLed; every cluster is listed through the survivor "+
		"(its kubeconfig's client certificate) every 100 ms until it answers, and its ConfigMaps are compared by name and uid.\n\n",
		strings.Join(sizes, ", "), cfg.Objects)
	return Table(results).WriteMarkdown(w)
}
