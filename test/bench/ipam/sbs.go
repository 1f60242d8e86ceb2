package main

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/capi-monolith/capi-monolith/ipam/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/test/bench/harness"
	"github.com/capi-monolith/capi-monolith/test/bench/harness/process"
	"github.com/capi-monolith/capi-monolith/test/envtest"
)

// The two sides of the side-by-side mode.
const (
	sideOurs = "capi-monolith"
	sidePeer = "in-cluster"
)

// ourArgs are the flags the side-by-side mode runs the binary with: the
// module alone and its defaults (client limits, concurrency), as a user
// runs it; Start adds the kubeconfig, ports and certificates.
func ourArgs(namespace string) []string {
	return []string{"--enable-modules=ipam", "--namespace=" + namespace}
}

// SBSConfig is what the side-by-side mode measures.
type SBSConfig struct {
	// Sizes are the numbers of claims made from an empty pool, one row each.
	Sizes []int
	// Runs is how many runs each side gets per size; the sides alternate.
	Runs int
	// Marginal is the number of claims made, after a size's claims are all
	// fulfilled, into the pool then holding that many addresses; 0 skips it.
	Marginal int
	// MarginalTimeout bounds the marginal phase: a side still short of its
	// marginal claims then is recorded with how many it fulfilled (a
	// problem of the run, and no restart), and the run goes on, so that
	// one side's backlog does not cost the other's figures. 0 leaves it to
	// RunTimeout.
	MarginalTimeout time.Duration
	// RawObjects is M of (a′), measured before each side's run.
	RawObjects    int
	CreateWorkers int
	// Warmup is the N of one discarded run per side; 0 means none.
	Warmup     int
	RunTimeout time.Duration
	// Restart adds, after the N claims (and the marginal ones), a restart
	// of the side's process with them bound and then a take-over of N
	// claims created while none runs (see Restart and TakeOver).
	Restart bool
	// Sides are the sides run, of sideOurs and sidePeer; empty means both.
	Sides []string
}

// claimsOf is how many claims one run of n makes in its pool.
func (c SBSConfig) claimsOf(n int) int {
	if c.Restart {
		return 2*n + c.Marginal + 1
	}
	return n + c.Marginal
}

func (c SBSConfig) runs(side string) bool {
	if len(c.Sides) == 0 {
		return true
	}
	for _, s := range c.Sides {
		if s == side {
			return true
		}
	}
	return false
}

// Validate reports settings that cannot give figures.
func (c SBSConfig) Validate() error {
	var errs []error
	if len(c.Sizes) == 0 {
		errs = append(errs, errors.New("no size N given"))
	}
	for _, n := range c.Sizes {
		if n < 1 || c.claimsOf(n) > 60000 {
			errs = append(errs, fmt.Errorf("the claims of a run (N, the marginal ones, and with -restart N more and one) must be between 1 and 60000 (a /16 pool), got %d for N=%d", c.claimsOf(n), n))
		}
	}
	if c.Runs < 1 || c.CreateWorkers < 1 || c.RunTimeout <= 0 || c.Marginal < 0 || c.MarginalTimeout < 0 || c.Warmup < 0 {
		errs = append(errs, errors.New("runs, create workers and run timeout must be positive, marginal, its timeout and warm-up not negative"))
	}
	for _, side := range c.Sides {
		if side != sideOurs && side != sidePeer {
			errs = append(errs, fmt.Errorf("unknown side %q: want %s or %s", side, sideOurs, sidePeer))
		}
	}
	if c.RawObjects < 1 || c.RawObjects > 60000 {
		errs = append(errs, fmt.Errorf("the raw object count must be between 1 and 60000, got %d", c.RawObjects))
	}
	return errors.Join(errs...)
}

// Phase is one batch of claims a side fulfilled.
type Phase struct {
	// Claims were created into a pool already holding Fill addresses.
	Claims, Fill int
	// Rate is Claims over the time from the first create to the last
	// fulfilment (status.addressRef set: the peer sets no Ready condition).
	Rate float64
	Wall time.Duration
	// CPU of kube-apiserver, etcd and the side's process over Wall.
	APIServerCPU, EtcdCPU, ControllerCPU time.Duration
	// Writes are the controller's writes to the ipam.cluster.x-k8s.io
	// group: kube-apiserver's apiserver_request_total (POST, PUT, PATCH,
	// DELETE, APPLY) less the feeding client's own.
	Writes float64
	// TimedOut is set when the phase ended at its bound (Wall) with only
	// Fulfilled of the Claims fulfilled; Rate is then Fulfilled over Wall,
	// and the CPU and writes are per claim created.
	TimedOut  bool
	Fulfilled int
}

func (p Phase) perClaim(d time.Duration) float64 {
	return float64(d.Microseconds()) / 1000 / float64(p.Claims)
}

// SBSRun is one side's run of one size.
type SBSRun struct {
	Side string
	N    int
	// RawUnthrottled is (a′), measured just before this run.
	RawUnthrottled    float64
	Empty             Phase
	Marginal          *Phase
	Restart           *Restart
	TakeOver          *TakeOver
	Addresses         int
	Duplicates        int
	LoadAverage       string
	Problems          []string
	ControllerRSSPeak uint64
}

// SBSResults are every run of one side-by-side invocation.
type SBSResults struct {
	Config                SBSConfig
	Machine               harness.Machine
	PeerCommit, PeerSrc   string
	OurArgs, PeerArgs     []string
	LoadBefore, LoadAfter string
	Runs                  []SBSRun
}

// Problems returns every failed correctness check.
func (r *SBSResults) Problems() []string {
	var out []string
	for i, run := range r.Runs {
		for _, p := range run.Problems {
			out = append(out, fmt.Sprintf("run %d (%s, N=%d): %s", i+1, run.Side, run.N, p))
		}
	}
	return out
}

// sbsSide is what differs between the two providers.
type sbsSide struct {
	name, comm string
	poolRef    ipamv1.IPPoolReference
	start      func(ctx context.Context, ns, dir string) (*process.Process, error)
	newPool    func(ns string) client.Object
	poolReady  func(obj client.Object) bool
}

// MeasureSideBySide builds both binaries, then runs, for each size, cfg.Runs
// rounds of (ours, peer) against env.
func MeasureSideBySide(ctx context.Context, env *envtest.Environment, cfg SBSConfig, peerSrc string, progress func(string, ...any)) (*SBSResults, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid benchmark settings: %w", err)
	}
	src, err := resolvePeerSource(ctx, peerSrc)
	if err != nil {
		return nil, err
	}
	scratch, err := os.MkdirTemp("", "bench-ipam-sbs-")
	if err != nil {
		return nil, fmt.Errorf("failed to create the scratch folder: %w", err)
	}
	defer os.RemoveAll(scratch)
	peerBin := ""
	if cfg.runs(sidePeer) {
		progress("building the in-cluster IPAM provider from %s in %s", src.Path, scratch)
		if peerBin, err = buildPeer(ctx, src, scratch); err != nil {
			return nil, err
		}
		if err := installPeerCRDs(env.Config, scratch); err != nil {
			return nil, err
		}
	}
	progress("building capi-monolith")
	ourBin, err := process.Build(ctx, scratch)
	if err != nil {
		return nil, err
	}
	// The restart reads each process's controller metrics.
	token := ""
	if cfg.Restart {
		if token, err = process.GrantDiagnostics(ctx, env.Config); err != nil {
			return nil, err
		}
	}
	b, err := NewBench(env, Config{
		Sizes: cfg.Sizes, Runs: cfg.Runs, Rate: harness.Rate{QPS: 1, Burst: 1}, Concurrency: 1,
		RawObjects: cfg.RawObjects, CreateWorkers: cfg.CreateWorkers, Window: 1, RunTimeout: cfg.RunTimeout, Cleanup: true,
	})
	if err != nil {
		return nil, err
	}
	r := &SBSResults{
		Config: cfg, Machine: harness.DescribeMachine(ctx), PeerCommit: src.Commit(ctx), PeerSrc: src.Path,
		OurArgs: ourArgs("<run namespace>"), PeerArgs: peerArgs("<run namespace>"),
	}
	runDir := 0
	sides := []sbsSide{
		{
			name: sideOurs, comm: "capi-monolith",
			poolRef: ipamv1.IPPoolReference{APIGroup: v1alpha1.GroupVersion.Group, Kind: v1alpha1.MonolithIPPoolKind, Name: poolName},
			start: func(ctx context.Context, ns, dir string) (*process.Process, error) {
				return process.Start(ctx, process.Options{Binary: ourBin, Config: env.Config, Dir: dir, Args: ourArgs(ns), DiagnosticsToken: token})
			},
			newPool: func(ns string) client.Object {
				return &v1alpha1.MonolithIPPool{
					ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: poolName},
					Spec:       v1alpha1.IPPoolSpec{Addresses: []string{poolCIDR}, Prefix: poolPrefix},
				}
			},
			poolReady: func(obj client.Object) bool {
				return conditions.IsTrue(obj.(*v1alpha1.MonolithIPPool), v1alpha1.ReadyCondition)
			},
		},
		{
			name: sidePeer, comm: peerBinaryName,
			poolRef: ipamv1.IPPoolReference{APIGroup: peerPoolGVK.Group, Kind: peerPoolGVK.Kind, Name: poolName},
			start: func(ctx context.Context, ns, dir string) (*process.Process, error) {
				return startPeer(ctx, peerBin, env.Config, dir, peerArgs(ns), token)
			},
			newPool: func(ns string) client.Object { return newPeerPool(ns) },
			poolReady: func(obj client.Object) bool {
				// Its pool reconciler counts the addresses once it runs.
				total, found, _ := unstructured.NestedInt64(obj.(*unstructured.Unstructured).Object, "status", "ipAddresses", "total")
				return found && total > 0
			},
		},
	}
	var chosen []sbsSide
	for _, side := range sides {
		if cfg.runs(side.name) {
			chosen = append(chosen, side)
		}
	}
	sides = chosen
	one := func(side sbsSide, n, marginal int, restart, last bool) (SBSRun, error) {
		runDir++
		return b.sbsRun(ctx, side, sbsRunSpec{
			n: n, marginal: marginal, marginalTimeout: cfg.MarginalTimeout, restart: restart, cleanup: !last,
			dir: filepath.Join(scratch, fmt.Sprintf("run-%d-%s", runDir, side.name)),
		}, progress)
	}
	if cfg.Warmup > 0 {
		for _, side := range sides {
			progress("warm-up: %s, N=%d", side.name, cfg.Warmup)
			if _, err := one(side, cfg.Warmup, 0, false, false); err != nil {
				return r, fmt.Errorf("the warm-up run of %s failed: %w", side.name, err)
			}
		}
	}
	r.LoadBefore = harness.LoadAverage()
	for si, n := range cfg.Sizes {
		for i := range cfg.Runs {
			for sj, side := range sides {
				// The apiserver stops after the last run: deleting its
				// objects first would only take minutes at 20,000 claims.
				last := si == len(cfg.Sizes)-1 && i == cfg.Runs-1 && sj == len(sides)-1
				progress("N=%d: run %d/%d of %s (load average %s)", n, i+1, cfg.Runs, side.name, harness.LoadAverage())
				run, err := one(side, n, cfg.Marginal, cfg.Restart, last)
				if err != nil {
					return r, fmt.Errorf("run %d/%d of %s with N=%d failed: %w", i+1, cfg.Runs, side.name, n, err)
				}
				r.Runs = append(r.Runs, run)
			}
		}
	}
	r.LoadAfter = harness.LoadAverage()
	return r, nil
}

// sbsRunSpec is one run of one side: n claims from an empty pool, then
// marginal more (bounded by marginalTimeout, 0: by the run's timeout), with
// restart the restart and take-over, in the scratch folder dir; cleanup
// deletes the run's objects after it.
type sbsRunSpec struct {
	n, marginal     int
	marginalTimeout time.Duration
	restart         bool
	cleanup         bool
	dir             string
}

// sbsRun measures (a′), then n claims from an empty pool and marginal more
// claims into it, with side's provider running as a process in dir; with
// restart, then a restart with those claims bound and a take-over of n
// claims made while the side was stopped.
func (b *Bench) sbsRun(ctx context.Context, side sbsSide, spec sbsRunSpec, progress func(string, ...any)) (SBSRun, error) {
	n, marginal, restart, cleanup, dir := spec.n, spec.marginal, spec.restart, spec.cleanup, spec.dir
	res := SBSRun{Side: side.name, N: n}
	ctx, cancel := context.WithTimeoutCause(ctx, b.cfg.RunTimeout, fmt.Errorf("the run of %s with N=%d took longer than %s", side.name, n, b.cfg.RunTimeout))
	defer cancel()
	rawNS, rawRate, err := b.rawCreateRate(ctx, b.cfg.RawObjects, harness.Unthrottled, rawUnthrottledWorkers)
	if err != nil {
		return res, err
	}
	res.RawUnthrottled = rawRate
	// The raw objects go before the run so that both sides meet the same
	// apiserver.
	if err := b.feed.DeleteAllOf(ctx, &ipamv1.IPAddress{}, client.InNamespace(rawNS)); err != nil {
		return res, fmt.Errorf("failed to delete the raw IPAddresses: %w", err)
	}
	progress("%s N=%d: (a′) %d raw creates at %.1f/s", side.name, n, b.cfg.RawObjects, rawRate)

	ns, err := b.env.CreateNamespace(ctx, "bench-ipam-sbs")
	if err != nil {
		return res, err
	}
	proc, err := side.start(ctx, ns.Name, dir)
	if err != nil {
		return res, err
	}
	defer func() {
		if proc != nil {
			_ = proc.Stop()
		}
	}()
	pool := side.newPool(ns.Name)
	if err := b.feed.Create(ctx, pool); err != nil {
		return res, fmt.Errorf("failed to create the pool: %w", err)
	}
	err = wait.PollUntilContextTimeout(ctx, pollInterval, poolReadyTimeout, true, func(ctx context.Context) (bool, error) {
		if err := b.feed.Get(ctx, client.ObjectKeyFromObject(pool), pool); err != nil {
			return false, fmt.Errorf("failed to get the pool: %w", err)
		}
		return side.poolReady(pool), nil
	})
	if err != nil {
		return res, fmt.Errorf("the pool of %s did not become ready: %w", side.name, err)
	}

	if res.Empty, err = b.phase(ctx, side, ns.Name, "claim", n, 0, 0); err != nil {
		return res, err
	}
	progress("%s N=%d: %.1f claims/s from an empty pool", side.name, n, res.Empty.Rate)
	want := n
	if marginal > 0 {
		m, err := b.phase(ctx, side, ns.Name, "more", marginal, n, spec.marginalTimeout)
		if err != nil {
			return res, err
		}
		res.Marginal = &m
		if m.TimedOut {
			res.Problems = append(res.Problems, fmt.Sprintf("%d of %d more claims fulfilled within %s", m.Fulfilled, marginal, m.Wall))
			progress("%s N=%d: %d of %d more claims fulfilled within %s; the run goes on without them", side.name, n, m.Fulfilled, marginal, m.Wall)
		} else {
			progress("%s N=%d: %.1f claims/s for %d more", side.name, n, m.Rate, marginal)
		}
		want += m.Fulfilled
	}
	exact := res.Marginal == nil || !res.Marginal.TimedOut
	if restart && !exact {
		res.Problems = append(res.Problems, "restart and take-over not measured: the marginal claims were not all fulfilled")
		restart = false
	}
	if restart {
		r, p, err := b.restart(ctx, side, ns.Name, dir, want, proc)
		proc = p
		if err != nil {
			return res, fmt.Errorf("the restart of %s: %w", side.name, err)
		}
		res.Restart = &r
		progress("%s restart with %d bound: ready after %s, a new claim fulfilled after %s, backlog done after %s%s; %.0f writes (load average %s)",
			side.name, want, r.Ready, r.NewClaim, r.Backlog, r.BacklogProblem, r.Writes, r.LoadAverage)
		want++
		t, p, err := b.takeOver(ctx, side, ns.Name, dir, n, want, proc)
		proc = p
		if err != nil {
			return res, fmt.Errorf("the take-over of %s: %w", side.name, err)
		}
		res.TakeOver = &t
		progress("%s take-over of %d: all fulfilled after %s, %.2f writes/claim (load average %s)", side.name, n, t.Wall, t.Writes, t.LoadAverage)
		want += n
	}
	res.LoadAverage = harness.LoadAverage()
	p := proc
	proc = nil
	how, err := stopped(p)
	if err != nil {
		return res, fmt.Errorf("%s failed: %w", side.name, err)
	}
	progress("%s N=%d: its process stopped %s", side.name, n, how)
	distinct, err := b.countAddresses(ctx, ns.Name, &res)
	if err != nil {
		return res, err
	}
	res.Duplicates = res.Addresses - distinct
	// Claims still waiting when a marginal phase timed out may have got an
	// address since: only duplicates count then.
	if exact && (res.Addresses != want || distinct != want) {
		res.Problems = append(res.Problems, fmt.Sprintf("%d IPAddresses, %d distinct addresses for %d claims", res.Addresses, distinct, want))
	}
	if !cleanup {
		return res, nil
	}
	if err := b.cleanup(ctx, ns.Name); err != nil {
		return res, err
	}
	if side.name == sidePeer {
		if err := b.deletePeerPools(ctx, ns.Name); err != nil {
			return res, err
		}
	}
	return res, nil
}

// phase creates count claims named prefix-<i> in ns as fast as the
// unthrottled feed goes and waits for every one to have an address, or,
// with a limit, at most that long (Phase.TimedOut).
func (b *Bench) phase(ctx context.Context, side sbsSide, ns, prefix string, count, fill int, limit time.Duration) (Phase, error) {
	p := Phase{Claims: count, Fill: fill}
	b.feedRequests.Reset()
	writesBefore, err := apiServerWrites(ctx, b.env)
	if err != nil {
		return p, err
	}
	cpuBefore, err := harness.ReadCPUTimes()
	if err != nil {
		return p, err
	}
	followCtx := ctx
	if limit > 0 {
		var cancel context.CancelFunc
		followCtx, cancel = context.WithTimeout(ctx, limit)
		defer cancel()
	}
	tl, err := b.createAndFollow(followCtx, claimBatch{
		namespace: ns,
		count:     count,
		claim: func(i int) *ipamv1.IPAddressClaim {
			return &ipamv1.IPAddressClaim{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s-%05d", prefix, i)},
				Spec:       ipamv1.IPAddressClaimSpec{PoolRef: side.poolRef},
			}
		},
		fulfilled: func(c *ipamv1.IPAddressClaim) bool {
			return strings.HasPrefix(c.Name, prefix+"-") && c.Status.AddressRef.Name != ""
		},
		progress: func(done int, elapsed time.Duration) {
			fmt.Fprintf(os.Stderr, "bench-ipam: %s %s: %d/%d fulfilled after %s\n", side.name, prefix, done, count, elapsed)
		},
	})
	p.TimedOut = err != nil && tl != nil && ctx.Err() == nil && errors.Is(followCtx.Err(), context.DeadlineExceeded)
	if err != nil && !p.TimedOut {
		return p, err
	}
	cpuAfter, err := harness.ReadCPUTimes()
	if err != nil {
		return p, err
	}
	if p.TimedOut {
		p.Fulfilled, p.Wall = tl.Len(), limit
		p.Rate = float64(p.Fulfilled) / limit.Seconds()
	} else {
		p.Fulfilled, p.Wall, p.Rate = count, tl.Elapsed(count), tl.Rate()
	}
	cpu := cpuAfter.Sub(cpuBefore)
	p.APIServerCPU, p.EtcdCPU, p.ControllerCPU = cpu["kube-apiserver"], cpu["etcd"], cpu[side.comm]
	writesAfter, err := apiServerWrites(ctx, b.env)
	if err != nil {
		return p, err
	}
	p.Writes = (writesAfter - writesBefore - float64(writes(b.feedRequests.Snapshot()))) / float64(count)
	return p, nil
}

// countAddresses lists the run's IPAddresses and returns how many distinct
// addresses they hold.
func (b *Bench) countAddresses(ctx context.Context, ns string, res *SBSRun) (int, error) {
	seen := map[netip.Addr]struct{}{}
	list := &ipamv1.IPAddressList{}
	for {
		if err := b.feed.List(ctx, list, client.InNamespace(ns), client.Limit(1000), client.Continue(list.Continue)); err != nil {
			return 0, fmt.Errorf("failed to list the run's IPAddresses: %w", err)
		}
		for i := range list.Items {
			res.Addresses++
			if addr, err := netip.ParseAddr(list.Items[i].Spec.Address); err == nil {
				seen[addr] = struct{}{}
			}
		}
		if list.Continue == "" {
			return len(seen), nil
		}
	}
}

// deletePeerPools deletes the peer's pools in ns, finalizers first.
func (b *Bench) deletePeerPools(ctx context.Context, ns string) error {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(peerPoolGVK.GroupVersion().WithKind(peerPoolGVK.Kind + "List"))
	if err := b.feed.List(ctx, list, client.InNamespace(ns)); err != nil {
		return fmt.Errorf("failed to list the peer's pools: %w", err)
	}
	unfinalize := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))
	for i := range list.Items {
		if err := b.feed.Patch(ctx, &list.Items[i], unfinalize); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("failed to remove the finalizers of the peer's pool: %w", err)
		}
		if err := b.feed.Delete(ctx, &list.Items[i]); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("failed to delete the peer's pool: %w", err)
		}
	}
	return nil
}

// apiServerWrites reads kube-apiserver's apiserver_request_total and sums
// the writes to the ipam.cluster.x-k8s.io group, which both providers'
// kinds and Cluster API's IPAM kinds belong to.
func apiServerWrites(ctx context.Context, env *envtest.Environment) (float64, error) {
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		return 0, fmt.Errorf("failed to create a clientset: %w", err)
	}
	stream, err := cs.RESTClient().Get().AbsPath("/metrics").Stream(ctx)
	if err != nil {
		return 0, fmt.Errorf("failed to read the apiserver's /metrics: %w", err)
	}
	defer stream.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(stream)
	if err != nil {
		return 0, fmt.Errorf("failed to parse the apiserver's /metrics: %w", err)
	}
	var sum float64
	for _, m := range families["apiserver_request_total"].GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["group"] != "ipam.cluster.x-k8s.io" {
			continue
		}
		switch labels["verb"] {
		case "POST", "PUT", "PATCH", "DELETE", "APPLY":
			sum += m.GetCounter().GetValue()
		}
	}
	return sum, nil
}
