package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/capi-monolith/capi-monolith/test/bench/harness"
	"github.com/capi-monolith/capi-monolith/test/bench/harness/clusters"
	"github.com/capi-monolith/capi-monolith/test/bench/harness/infrarun"
	"github.com/capi-monolith/capi-monolith/test/bench/harness/process"
)

// Config is one invocation of the benchmark.
type Config struct {
	// Rate is the offered creates per second, for Duration.
	Rate     float64
	Duration time.Duration
	// Runs are measured after one discarded warm-up run of WarmUp at Rate.
	Runs   int
	WarmUp time.Duration
	// MachinesPerCluster and ClustersPerNamespace shape the fleet.
	MachinesPerCluster   int
	ClustersPerNamespace int
	// QPS are the process's --kube-api-qps settings to measure, each with
	// --kube-api-burst at twice it (the binary's defaults are 100 and 200).
	QPS []float64
	// Timeout bounds the wait for the last machine after the last create.
	Timeout time.Duration
}

// DefaultConfig is what `make bench-latency` runs.
func DefaultConfig() Config {
	return Config{Rate: 50, Duration: 60 * time.Second, Runs: 3, WarmUp: 10 * time.Second,
		MachinesPerCluster: 10, ClustersPerNamespace: 10, QPS: []float64{100, 400}, Timeout: 10 * time.Minute}
}

// Result is one run.
type Result struct {
	// QPS is the process's --kube-api-qps.
	QPS float64
	N   int
	// P50, P99 and Max are of the latencies from sending a machine's create
	// to a watch seeing it provisioned.
	P50, P99, Max, Mean time.Duration
	// Offered is the create rate achieved (N over first to last send).
	Offered float64
	// Drain is from the last create sent to the last machine provisioned.
	Drain time.Duration
	// Wall is from the first create sent to the last machine provisioned.
	Wall time.Duration
	// Peak is the process's VmHWM; CPU its CPU time over the run; Others
	// the CPU time of the rest of the machine's work over the run: keys
	// "kube-apiserver", "etcd" and harness.Self (the creates and the watch).
	Peak   uint64
	CPU    time.Duration
	Others harness.CPUTimes
	// Requests are the process's API requests over the run.
	Requests float64
}

// Measure runs rate × duration machines once: a fresh fleet of their
// Clusters and Machines, a fresh infra process, the MonolithMachines
// created on a fixed schedule (open loop: a create is sent every 1/rate
// whatever the earlier ones do), then everything deleted again.
func Measure(ctx context.Context, b *process.Bench, cfg Config, qps float64, duration time.Duration, runName string) (res Result, retErr error) {
	n := int(cfg.Rate * duration.Seconds())
	res.N, res.QPS = n, qps
	run, err := infrarun.Start(ctx, infrarun.Options{Env: b.Env, Binary: b.Binary, Dir: filepath.Join(b.Dir, runName), Token: b.Token,
		Machines: n, MachinesPerCluster: cfg.MachinesPerCluster, ClustersPerNamespace: cfg.ClustersPerNamespace, NamePrefix: "latency-",
		QPS: qps, Timeout: cfg.Timeout})
	if err != nil {
		return res, err
	}
	defer func() { retErr = errors.Join(retErr, run.Close(ctx)) }()
	p, mms := run.Process, run.MonolithMachines
	before, err := run.Usage(ctx)
	if err != nil {
		return res, err
	}

	index := make(map[string]int, n)
	for i, mm := range mms {
		index[mm.Namespace+"/"+mm.Name] = i
	}
	sent := make([]time.Time, n)
	provisioned := make([]time.Time, n)
	var mu sync.Mutex
	seen := 0
	wctx, cancel := context.WithTimeout(ctx, duration+cfg.Timeout)
	defer cancel()
	watched := make(chan error, 1)
	go func() {
		watched <- clusters.WatchProvisioned(wctx, run.Client, run.Fleet.Namespaces, func(key string, at time.Time) bool {
			mu.Lock()
			defer mu.Unlock()
			if i, ok := index[key]; ok && provisioned[i].IsZero() {
				provisioned[i] = at
				seen++
			}
			return seen >= n
		})
	}()

	start := time.Now()
	interval := time.Duration(float64(time.Second) / cfg.Rate)
	created := make(chan error, n)
	for i := range n {
		// Sleep until this create's slot: the schedule never waits for
		// earlier creates, so a slow provider shows as latency, not as a
		// lower offered rate.
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
			select {
			case <-time.After(d):
			case <-wctx.Done():
				return res, wctx.Err()
			}
		}
		sent[i] = time.Now()
		go func() {
			created <- run.Create(wctx, i)
		}()
	}
	for range n {
		if err := <-created; err != nil {
			return res, err
		}
	}
	if err := <-watched; err != nil {
		return res, fmt.Errorf("%d of %d machines provisioned: %w; the process's log:\n%s", seen, n, err, p.Log())
	}

	latencies := make([]time.Duration, n)
	var sum time.Duration
	last := provisioned[0]
	for i := range n {
		latencies[i] = provisioned[i].Sub(sent[i])
		sum += latencies[i]
		if provisioned[i].After(last) {
			last = provisioned[i]
		}
	}
	slices.Sort(latencies)
	res.P50, res.P99, res.Max = percentile(latencies, 0.50), percentile(latencies, 0.99), latencies[n-1]
	res.Mean = sum / time.Duration(n)
	if n > 1 {
		res.Offered = float64(n-1) / sent[n-1].Sub(sent[0]).Seconds()
	}
	res.Drain = last.Sub(sent[n-1])
	res.Wall = last.Sub(sent[0])
	after, err := run.Usage(ctx)
	if err != nil {
		return res, err
	}
	used := after.Since(before)
	res.CPU, res.Others, res.Peak, res.Requests = used.CPU, used.Others, used.Peak, used.TotalRequests()
	return res, nil
}

// percentile is the nearest-rank percentile of sorted values.
func percentile(sorted []time.Duration, q float64) time.Duration {
	rank := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(rank, len(sorted)-1))]
}
