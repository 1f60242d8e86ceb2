package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/capi-monolith/capi-monolith/test/bench/harness"
	"github.com/capi-monolith/capi-monolith/test/bench/harness/process"
)

// backlogPoll is how often the restarted process's metrics are read.
const backlogPoll = 200 * time.Millisecond

// claimController is the name both providers' claim controllers have in
// controller-runtime's metrics (the lower-cased kind of For).
const claimController = "ipaddressclaim"

// Restart is what a restart of a side's process with N bound claims cost.
// Every duration is from the new process's start (exec).
type Restart struct {
	// Bound is the number of claims bound before the restart.
	Bound int
	// Ready is until its /readyz answered 200.
	Ready time.Duration
	// NewClaim is until a claim created as soon as /readyz answered was
	// fulfilled: "ready again" as a user sees it.
	NewClaim time.Duration
	// Backlog is until its claim controller had made at least Bound+1
	// reconciles and its workqueue was empty; zero when its metrics could
	// not be read (BacklogProblem says why).
	Backlog        time.Duration
	BacklogProblem string
	// Writes are the writes to the ipam.cluster.x-k8s.io group from the
	// start to the end of the restart (the later of NewClaim and Backlog),
	// the new claim's own included, the feeding client's create excluded.
	Writes float64
	// ControllerCPU is the new process's CPU time, APIServerCPU
	// kube-apiserver's, over the same span.
	ControllerCPU, APIServerCPU time.Duration
	LoadAverage                 string
	// Stopped says how the process before it stopped (see stopped).
	Stopped string
}

// TakeOver is what taking over claims created while no process of the
// side ran cost.
type TakeOver struct {
	// Claims were created while the side was stopped, into a pool holding
	// Fill addresses.
	Claims, Fill int
	// Ready is from the process's start to /readyz 200; Wall to the last
	// claim fulfilled.
	Ready, Wall                 time.Duration
	ControllerCPU, APIServerCPU time.Duration
	// Writes per claim, as for Phase.
	Writes      float64
	LoadAverage string
	// Stopped says how the process before it stopped (see stopped).
	Stopped string
}

// stopped stops p and says how: on SIGTERM, or killed once its grace
// period was over, which is what a kubelet does to a Pod and no reason to
// give up on the measurement that follows; any other error is returned.
func stopped(p *process.Process) (string, error) {
	err := p.Stop()
	switch {
	case err == nil:
		return "on SIGTERM", nil
	case errors.Is(err, process.ErrKilledAfterGrace):
		return fmt.Sprintf("killed %s after SIGTERM", process.StopGracePeriod), nil
	default:
		return "", err
	}
}

// Rate is claims fulfilled per second of Wall.
func (t TakeOver) Rate() float64 { return float64(t.Claims) / t.Wall.Seconds() }

// restart stops the side's running process (SIGTERM), starts a fresh one
// and measures how soon it is ready again; it returns the new process.
func (b *Bench) restart(ctx context.Context, side sbsSide, ns, dir string, bound int, old *process.Process) (Restart, *process.Process, error) {
	r := Restart{Bound: bound}
	var err error
	if r.Stopped, err = stopped(old); err != nil {
		return r, nil, fmt.Errorf("%s failed to stop: %w", side.name, err)
	}
	b.feedRequests.Reset()
	writesBefore, err := apiServerWrites(ctx, b.env)
	if err != nil {
		return r, nil, err
	}
	cpuBefore, err := harness.ReadCPUTimes()
	if err != nil {
		return r, nil, err
	}
	start := time.Now()
	p, err := side.start(ctx, ns, dir)
	if err != nil {
		return r, nil, err
	}
	r.Ready = time.Since(start)

	backlog := make(chan error, 1)
	go func() { backlog <- waitBacklog(ctx, p, bound+1, start, &r.Backlog) }()
	if _, err := b.createAndFollow(ctx, claimBatch{
		namespace: ns, count: 1,
		claim: func(int) *ipamv1.IPAddressClaim {
			return &ipamv1.IPAddressClaim{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "restart-00000"},
				Spec:       ipamv1.IPAddressClaimSpec{PoolRef: side.poolRef},
			}
		},
		fulfilled: func(c *ipamv1.IPAddressClaim) bool {
			return c.Name == "restart-00000" && c.Status.AddressRef.Name != ""
		},
		progress: func(int, time.Duration) {},
	}); err != nil {
		return r, p, err
	}
	r.NewClaim = time.Since(start)
	if err := <-backlog; err != nil {
		r.BacklogProblem = err.Error()
	}
	cpu, err := p.CPU()
	if err != nil {
		return r, p, err
	}
	r.ControllerCPU = cpu
	cpuAfter, err := harness.ReadCPUTimes()
	if err != nil {
		return r, p, err
	}
	r.APIServerCPU = cpuAfter.Sub(cpuBefore)["kube-apiserver"]
	writesAfter, err := apiServerWrites(ctx, b.env)
	if err != nil {
		return r, p, err
	}
	r.Writes = writesAfter - writesBefore - float64(writes(b.feedRequests.Snapshot()))
	r.LoadAverage = harness.LoadAverage()
	return r, p, nil
}

// waitBacklog polls p's metrics until its claim controller has made at
// least want reconciles and its workqueue is empty, and sets *took to the
// time since start then. The controller's reconcile count is the honest
// "backlog done": every claim the informer handed it at start has been
// reconciled once (later events add reconciles, so it may be a little
// early by as many), and nothing waits in the queue.
func waitBacklog(ctx context.Context, p *process.Process, want int, start time.Time, took *time.Duration) error {
	if p.Address == "" {
		return errors.New("its metrics are not read")
	}
	tick := time.NewTicker(backlogPoll)
	defer tick.Stop()
	var lastErr error
	for {
		m, err := p.Metrics(ctx)
		if err == nil {
			reconciles := m.Sum("controller_runtime_reconcile_total", "controller", claimController)
			depth := m.Sum("workqueue_depth", "name", claimController)
			if reconciles >= float64(want) && depth == 0 {
				*took = time.Since(start)
				return nil
			}
		} else {
			lastErr = err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the backlog was not done (last metrics error: %v): %w", lastErr, context.Cause(ctx))
		case <-tick.C:
		}
	}
}

// takeOver stops the side's process, creates count claims while none
// runs, starts a fresh process and times it to the last one fulfilled.
func (b *Bench) takeOver(ctx context.Context, side sbsSide, ns, dir string, count, fill int, old *process.Process) (TakeOver, *process.Process, error) {
	t := TakeOver{Claims: count, Fill: fill}
	var err error
	if t.Stopped, err = stopped(old); err != nil {
		return t, nil, fmt.Errorf("%s failed to stop: %w", side.name, err)
	}
	const prefix = "take"
	err = harness.ForEach(ctx, count, b.cfg.CreateWorkers, func(ctx context.Context, i int) error {
		c := &ipamv1.IPAddressClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s-%05d", prefix, i)},
			Spec:       ipamv1.IPAddressClaimSpec{PoolRef: side.poolRef},
		}
		if err := b.feed.Create(ctx, c); err != nil {
			return fmt.Errorf("failed to create IPAddressClaim %s: %w", c.Name, err)
		}
		return nil
	})
	if err != nil {
		return t, nil, err
	}
	writesBefore, err := apiServerWrites(ctx, b.env)
	if err != nil {
		return t, nil, err
	}
	cpuBefore, err := harness.ReadCPUTimes()
	if err != nil {
		return t, nil, err
	}
	start := time.Now()
	p, err := side.start(ctx, ns, dir)
	if err != nil {
		return t, nil, err
	}
	t.Ready = time.Since(start)
	done := map[string]bool{}
	var fulfilled atomic.Int64
	tick := time.NewTicker(progressInterval)
	defer tick.Stop()
	watched := make(chan error, 1)
	go func() {
		watched <- harness.WatchEach(ctx, b.feed, &ipamv1.IPAddressClaimList{}, func(_ watch.EventType, obj client.Object) (bool, error) {
			c, ok := obj.(*ipamv1.IPAddressClaim)
			if !ok {
				return false, fmt.Errorf("watch of IPAddressClaims sent %T", obj)
			}
			if strings.HasPrefix(c.Name, prefix+"-") && c.Status.AddressRef.Name != "" && !done[c.Name] {
				done[c.Name] = true
				fulfilled.Store(int64(len(done)))
				if len(done) == count {
					t.Wall = time.Since(start)
					return true, nil
				}
			}
			return false, nil
		}, client.InNamespace(ns))
	}()
	for waiting := true; waiting; {
		select {
		case err := <-watched:
			if err != nil {
				return t, p, fmt.Errorf("failed to follow the claims taken over: %w", err)
			}
			waiting = false
		case <-tick.C:
			fmt.Fprintf(os.Stderr, "bench-ipam: %s take-over: %d/%d fulfilled after %s\n", side.name, fulfilled.Load(), count, time.Since(start).Round(time.Second))
		}
	}
	cpu, err := p.CPU()
	if err != nil {
		return t, p, err
	}
	t.ControllerCPU = cpu
	cpuAfter, err := harness.ReadCPUTimes()
	if err != nil {
		return t, p, err
	}
	t.APIServerCPU = cpuAfter.Sub(cpuBefore)["kube-apiserver"]
	writesAfter, err := apiServerWrites(ctx, b.env)
	if err != nil {
		return t, p, err
	}
	t.Writes = (writesAfter - writesBefore) / float64(count)
	t.LoadAverage = harness.LoadAverage()
	return t, p, nil
}
