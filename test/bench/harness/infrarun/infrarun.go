// Package infrarun prepares one run of an infrastructure benchmark: a fleet
// of clusters and Machines as Cluster API core leaves them, and a fresh
// `capi-monolith --enable-modules=infra` process that has reconciled them and
// is idle, waiting for the MonolithMachines the benchmark will create. Close
// deletes the fleet through the provider and stops it.
package infrarun

import (
	"context"
	"errors"
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/test/bench/harness"
	"github.com/capi-monolith/capi-monolith/test/bench/harness/clusters"
	"github.com/capi-monolith/capi-monolith/test/bench/harness/process"
	"github.com/capi-monolith/capi-monolith/test/envtest"
)

// Options describe a run.
type Options struct {
	Env *envtest.Environment
	// Binary, Dir and Token start the process (see process.Options).
	Binary, Dir, Token string
	// Machines to prepare, MachinesPerCluster to a cluster and
	// ClustersPerNamespace to a namespace named NamePrefix...
	Machines             int
	MachinesPerCluster   int
	ClustersPerNamespace int
	NamePrefix           string
	// QPS is the process's --kube-api-qps; its burst is twice that, as in
	// the binary's defaults (100, 200).
	QPS float64
	// Timeout bounds waiting for the process to be idle, and for the
	// provider to delete the fleet's infrastructure objects.
	Timeout time.Duration
	// Requests, if set, counts the requests of Run.Client, so that the
	// benchmark's own can be told from the process's in the apiserver's
	// counts.
	Requests *harness.Requests
}

// Run is a prepared run.
type Run struct {
	// Client is unthrottled, for feeding the run.
	Client  client.WithWatch
	Fleet   *clusters.Fleet
	Process *process.Process
	// MonolithMachines are the Machines' infrastructure, not created yet.
	MonolithMachines []*infrav1.MonolithMachine
	timeout          time.Duration
}

// Start creates the fleet, starts the process and waits until it has
// reconciled the clusters and is idle.
func Start(ctx context.Context, opts Options) (_ *Run, retErr error) {
	cfg := opts.Env.Config
	if opts.Requests != nil {
		cfg = opts.Requests.Wrap(cfg)
	}
	c, err := harness.NewClient(cfg, opts.Env.Client.Scheme(), harness.Unthrottled)
	if err != nil {
		return nil, err
	}
	perCluster := min(opts.MachinesPerCluster, opts.Machines)
	fleet, err := clusters.CreateFleet(ctx, c, clusters.FleetOptions{NamePrefix: opts.NamePrefix,
		Clusters:           (opts.Machines + perCluster - 1) / perCluster,
		MachinesPerCluster: perCluster, ClustersPerNamespace: opts.ClustersPerNamespace, Workers: 16})
	if err != nil {
		return nil, err
	}
	p, err := process.Start(ctx, process.Options{Binary: opts.Binary, Config: opts.Env.Config, DiagnosticsToken: opts.Token, Dir: opts.Dir,
		Args: []string{"--enable-modules=infra", fmt.Sprintf("--kube-api-qps=%g", opts.QPS), fmt.Sprintf("--kube-api-burst=%g", 2*opts.QPS)}})
	if err != nil {
		return nil, err
	}
	r := &Run{Client: c, Fleet: fleet, Process: p, MonolithMachines: fleet.MonolithMachines()[:opts.Machines], timeout: opts.Timeout}
	defer func() {
		if retErr != nil {
			retErr = errors.Join(retErr, r.Close(ctx))
		}
	}()
	// The clusters' reconciles are over before the machines arrive.
	if err := process.WaitSteady(ctx, []*process.Process{p}, opts.Timeout); err != nil {
		return nil, err
	}
	return r, nil
}

// Create creates MonolithMachine i.
func (r *Run) Create(ctx context.Context, i int) error {
	mm := r.MonolithMachines[i]
	if err := r.Client.Create(ctx, mm); err != nil {
		return fmt.Errorf("failed to create MonolithMachine %s/%s: %w", mm.Namespace, mm.Name, err)
	}
	return nil
}

// Usage is what a run has used up to a point in time.
type Usage struct {
	// CPU is the process's CPU time; Others that of the benchmark's other
	// processes: "kube-apiserver", "etcd" and harness.Self (the benchmark,
	// feeding the run and watching it).
	CPU    time.Duration
	Others harness.CPUTimes
	// Requests are the process's API requests, by method; RequestCodes
	// by method and response code ("PATCH 409").
	Requests, RequestCodes map[string]float64
	// Peak is the process's VmHWM.
	Peak uint64
}

// Usage reads what the run has used so far.
func (r *Run) Usage(ctx context.Context) (Usage, error) {
	var u Usage
	var err error
	if u.CPU, err = r.Process.CPU(); err != nil {
		return u, err
	}
	if u.Others, err = harness.ReadCPUTimes(); err != nil {
		return u, err
	}
	mem, err := r.Process.Memory()
	if err != nil {
		return u, err
	}
	u.Peak = mem.Peak
	metrics, err := r.Process.Metrics(ctx)
	if err != nil {
		return u, err
	}
	u.Requests = metrics.ByLabel("rest_client_requests_total", "method")
	u.RequestCodes = metrics.ByLabels("rest_client_requests_total", "method", "code")
	return u, nil
}

// Since is what was used from before to u; Peak stays u's, as VmHWM
// cannot be taken apart.
func (u Usage) Since(before Usage) Usage {
	return Usage{CPU: u.CPU - before.CPU, Others: u.Others.Sub(before.Others), Peak: u.Peak,
		Requests: growth(u.Requests, before.Requests), RequestCodes: growth(u.RequestCodes, before.RequestCodes)}
}

func growth(now, before map[string]float64) map[string]float64 {
	d := map[string]float64{}
	for k, v := range now {
		if n := v - before[k]; n > 0 {
			d[k] = n
		}
	}
	return d
}

// TotalRequests sums Requests.
func (u Usage) TotalRequests() float64 {
	var s float64
	for _, v := range u.Requests {
		s += v
	}
	return s
}

// Close deletes the fleet while the provider still runs, because it removes
// its finalizers, then stops the process.
func (r *Run) Close(ctx context.Context) error {
	return errors.Join(r.Fleet.Delete(ctx, r.Client, r.timeout), r.Process.Stop())
}
