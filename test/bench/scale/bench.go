package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/capi-monolith/capi-monolith/test/bench/harness"
	"github.com/capi-monolith/capi-monolith/test/bench/harness/clusters"
	"github.com/capi-monolith/capi-monolith/test/bench/harness/infrarun"
	"github.com/capi-monolith/capi-monolith/test/bench/harness/process"
)

// Config is one invocation of the benchmark.
type Config struct {
	Sizes []int
	// Runs per size, after one discarded warm-up run of WarmUp machines.
	Runs   int
	WarmUp int
	// MachinesPerCluster and ClustersPerNamespace shape the fleet.
	MachinesPerCluster   int
	ClustersPerNamespace int
	// QPS is the process's --kube-api-qps (burst twice that).
	QPS float64
	// ProfileSeconds, when positive, takes a CPU profile of that length from
	// the process's diagnostics endpoint during the first run of the
	// largest size, written to ProfilePath.
	ProfileSeconds int
	ProfilePath    string
	// Timeout bounds one run's wait for every machine.
	Timeout time.Duration
}

// DefaultConfig is what `make bench-scale` runs.
func DefaultConfig() Config {
	return Config{Sizes: []int{100, 1000, 5000}, Runs: 3, WarmUp: 100, MachinesPerCluster: 10, ClustersPerNamespace: 10,
		QPS: 100, ProfileSeconds: 20, Timeout: 30 * time.Minute}
}

// Result is one run.
type Result struct {
	N int
	// Took is from the first create to the N-th machine seen provisioned.
	Took time.Duration
	// Created is from the first create to the last create returning.
	Created time.Duration
	// Peak is the process's VmHWM at the end (fresh process per run).
	Peak uint64
	// CPU is the process's CPU time from the first create to the N-th
	// provisioned; Others are kube-apiserver's and etcd's.
	CPU    time.Duration
	Others harness.CPUTimes
	// Requests are the process's API requests in that time, by method
	// (its rest_client_requests_total); RequestCodes by method and code.
	Requests, RequestCodes map[string]float64
	// Served are the process's requests in that time as kube-apiserver
	// counted them (apiserver_request_total), by verb, resource and code.
	Served map[harness.APIRequest]float64
}

// TotalRequests sums Requests.
func (r Result) TotalRequests() float64 {
	var s float64
	for _, v := range r.Requests {
		s += v
	}
	return s
}

// PerMachine returns d per machine, in milliseconds.
func (r Result) PerMachine(d time.Duration) float64 {
	return float64(d) / float64(time.Millisecond) / float64(r.N)
}

// Measure runs n machines once: a fresh fleet of n machines' Clusters and
// Machines, a fresh infra process, n MonolithMachines created at once by an
// unthrottled client, then everything deleted again.
func Measure(ctx context.Context, b *process.Bench, cfg Config, n int, runName string, profile bool) (res Result, retErr error) {
	res.N = n
	own := harness.NewRequests()
	run, err := infrarun.Start(ctx, infrarun.Options{Env: b.Env, Binary: b.Binary, Dir: filepath.Join(b.Dir, runName), Token: b.Token,
		Machines: n, MachinesPerCluster: cfg.MachinesPerCluster, ClustersPerNamespace: cfg.ClustersPerNamespace, NamePrefix: "scale-",
		QPS: cfg.QPS, Timeout: cfg.Timeout, Requests: own})
	if err != nil {
		return res, err
	}
	defer func() { retErr = errors.Join(retErr, run.Close(ctx)) }()
	p := run.Process
	before, err := run.Usage(ctx)
	if err != nil {
		return res, fmt.Errorf("%w; the process's log:\n%s", err, p.Log())
	}
	servedBefore, err := harness.APIServerRequests(ctx, b.Env.Config)
	if err != nil {
		return res, err
	}
	own.Reset()

	wctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	start := time.Now()
	tl := harness.NewTimeline(start)
	watched := make(chan error, 1)
	go func() {
		watched <- clusters.WatchProvisioned(wctx, run.Client, run.Fleet.Namespaces, func(key string, at time.Time) bool {
			tl.Mark(key, at)
			return tl.Len() >= n
		})
	}()
	profiled := make(chan error, 1)
	if profile {
		go func() {
			profiled <- p.SaveProfile(wctx, fmt.Sprintf("profile?seconds=%d", cfg.ProfileSeconds), cfg.ProfilePath)
		}()
	} else {
		profiled <- nil
	}
	if err := harness.ForEach(wctx, n, 16, run.Create); err != nil {
		return res, err
	}
	res.Created = time.Since(start)
	if err := <-watched; err != nil {
		return res, fmt.Errorf("%d of %d machines provisioned: %w; the process's log:\n%s", tl.Len(), n, err, p.Log())
	}
	res.Took = tl.Elapsed(n)
	after, err := run.Usage(ctx)
	if err != nil {
		return res, fmt.Errorf("%w; the process's log:\n%s", err, p.Log())
	}
	ownSnapshot := own.Snapshot()
	servedAfter, err := harness.APIServerRequests(ctx, b.Env.Config)
	if err != nil {
		return res, err
	}
	served := map[harness.APIRequest]float64{}
	for k, v := range servedAfter {
		if d := v - servedBefore[k]; d > 0 {
			served[k] = d
		}
	}
	res.Served = processRequests(served, ownSnapshot)
	used := after.Since(before)
	res.CPU, res.Others, res.Peak, res.Requests, res.RequestCodes = used.CPU, used.Others, used.Peak, used.Requests, used.RequestCodes
	delete(res.Others, harness.Self)
	if err := <-profiled; err != nil {
		return res, err
	}
	return res, nil
}
