package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/capi-monolith/capi-monolith/ipam"
	"github.com/capi-monolith/capi-monolith/ipam/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/manager"
	"github.com/capi-monolith/capi-monolith/test/bench/harness"
	"github.com/capi-monolith/capi-monolith/test/bench/harness/memstat"
	"github.com/capi-monolith/capi-monolith/test/envtest"
	"github.com/capi-monolith/capi-monolith/test/managertest"
)

const (
	// poolCIDR is the one pool every run allocates from.
	poolCIDR   = "10.0.0.0/16"
	poolPrefix = 16
	poolName   = "bench"

	// rssInterval is how often VmRSS is sampled beside VmHWM.
	rssInterval = 100 * time.Millisecond
	// progressInterval is how often a long run reports how far it got.
	progressInterval = 15 * time.Second
	// poolReadyTimeout bounds the wait for the pool reconciler, and for it
	// to count every address once the claims are fulfilled.
	poolReadyTimeout = time.Minute
	pollInterval     = 250 * time.Millisecond
)

// Config is what one invocation measures.
type Config struct {
	// Sizes are the numbers of claims N, one row of figures each.
	Sizes []int
	// Runs is how many measured runs each size gets.
	Runs int
	// Rate is the client setting of both the raw create client (a) and the
	// module (--kube-api-qps, --kube-api-burst).
	Rate harness.Rate
	// Concurrency is --ipam-concurrency and the number of goroutines of the
	// raw create client.
	Concurrency int
	// RawObjects is M, the number of IPAddresses the raw client creates.
	RawObjects int
	// CreateWorkers is the number of goroutines creating claims, with an
	// unthrottled client so that creation is not the bottleneck.
	CreateWorkers int
	// Warmup is the N of a run made before measuring and thrown away; 0
	// means none.
	Warmup int
	// Window is the number of claims in the first and last windows.
	Window int
	// RunTimeout bounds one run.
	RunTimeout time.Duration
	// Cleanup deletes each run's objects once it is measured, so that the
	// runs stay independent: the apiserver otherwise carries every earlier
	// run's objects (and grows) into the next one.
	Cleanup bool
	// Progress receives one line per step; nil means silence.
	Progress io.Writer
}

// DefaultConfig returns the settings of `make bench-ipam`.
func DefaultConfig() Config {
	return Config{
		Sizes:         []int{1000, 10000},
		Runs:          3,
		Rate:          harness.Rate{QPS: 200, Burst: 400},
		Concurrency:   manager.DefaultConcurrency,
		RawObjects:    2000,
		CreateWorkers: 16,
		Warmup:        200,
		Window:        1000,
		RunTimeout:    30 * time.Minute,
		Cleanup:       true,
	}
}

// Validate reports settings that cannot give figures.
func (c Config) Validate() error {
	var errs []error
	if len(c.Sizes) == 0 {
		errs = append(errs, errors.New("no size N given"))
	}
	for _, n := range c.Sizes {
		if n < 1 || n > 60000 {
			errs = append(errs, fmt.Errorf("N must be between 1 and 60000 (a /16 pool), got %d", n))
		}
	}
	if c.Runs < 1 || c.Concurrency < 1 || c.CreateWorkers < 1 || c.Window < 1 || c.RunTimeout <= 0 {
		errs = append(errs, errors.New("runs, concurrency, create workers, window and run timeout must be positive"))
	}
	if c.RawObjects < 1 || c.RawObjects > 60000 {
		errs = append(errs, fmt.Errorf("the raw object count must be between 1 and 60000, got %d", c.RawObjects))
	}
	if c.Rate.QPS <= 0 || c.Rate.Burst <= 0 {
		errs = append(errs, fmt.Errorf("qps and burst must be positive (the module requires it), got %s", c.Rate))
	}
	return errors.Join(errs...)
}

// RunResult is one measured run.
type RunResult struct {
	N int
	// RawRate is (a): IPAddresses created per second by a client with the
	// module's rate limit.
	RawRate float64
	// RawUnthrottledRate is (a′): IPAddresses created per second by
	// rawUnthrottledWorkers goroutines through a client with no rate limit,
	// what the apiserver itself takes.
	RawUnthrottledRate float64
	// WritesPerClaim is the module's create, update, patch and delete
	// requests from its start to the N-th fulfilment, over N.
	WritesPerClaim float64
	// CreateRate is how fast the unthrottled client created the claims.
	CreateRate float64
	// FulfilRate is (b): claims fulfilled per second, from the first create
	// to the last fulfilment.
	FulfilRate float64
	// Fulfilled is the number of claims seen Ready with an address.
	Fulfilled int
	// WindowSize is min(Window, N); FirstWindow runs from the first create
	// to the WindowSize-th fulfilment, LastWindow from the
	// (N-WindowSize)-th to the N-th.
	WindowSize              int
	FirstWindow, LastWindow time.Duration
	// Addresses is the number of IPAddresses in the run's namespace and
	// Distinct the number of distinct addresses among them.
	Addresses, Distinct int
	// PoolUsed is the pool's status.ipAddresses.used at the end.
	PoolUsed int64
	// PeakRSS is VmHWM over the run; PeakReset says whether it was reset
	// at the start (otherwise it is the process's lifetime peak).
	PeakRSS   uint64
	PeakReset bool
	// SampledRSS is the largest VmRSS sampled every rssInterval.
	SampledRSS uint64
	// LoadAverage is /proc/loadavg at the end of the run.
	LoadAverage string
	// ModuleRequests are the module's requests to the apiserver, from its
	// start to the N-th fulfilment; FeedRequests those of the client that
	// creates and watches the claims, over the same time.
	ModuleRequests, FeedRequests []harness.RequestCount
	// CPU is the CPU time this process, kube-apiserver and etcd used from
	// the first create to the N-th fulfilment, which took CPUWall.
	CPU     harness.CPUTimes
	CPUWall time.Duration
	// ControlPlaneRSS is the resident memory of kube-apiserver and etcd
	// at the N-th fulfilment.
	ControlPlaneRSS map[string]uint64
	// Problems are the correctness checks that failed.
	Problems []string
}

// Bench runs the IPAM benchmark against one envtest apiserver.
type Bench struct {
	env *envtest.Environment
	cfg Config
	// feed creates the claims, watches them and checks the result; it is
	// unthrottled so that it is never what limits the module.
	feed client.WithWatch
	// feedRequests counts feed's requests.
	feedRequests *harness.Requests
}

// NewBench returns a benchmark using env, whose scheme must hold Cluster
// API's IPAM types and the module's pool kinds.
func NewBench(env *envtest.Environment, cfg Config) (*Bench, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid benchmark settings: %w", err)
	}
	feedRequests := harness.NewRequests()
	feed, err := harness.NewClient(feedRequests.Wrap(env.Config), env.Scheme, harness.Unthrottled)
	if err != nil {
		return nil, err
	}
	return &Bench{env: env, cfg: cfg, feed: feed, feedRequests: feedRequests}, nil
}

func (b *Bench) progress(format string, args ...any) {
	if b.cfg.Progress != nil {
		fmt.Fprintf(b.cfg.Progress, "bench-ipam: "+format+"\n", args...)
	}
}

// ManagerOptions are the manager's typed options the module runs with;
// namespace is the run's.
func (b *Bench) ManagerOptions(namespace string) manager.Options {
	opts := managertest.Options(ipam.Name)
	opts.Concurrency[ipam.Name] = b.cfg.Concurrency
	opts.KubeAPIQPS = b.cfg.Rate.QPS
	opts.KubeAPIBurst = b.cfg.Rate.Burst
	// Each run's manager caches its own namespace only, so that the
	// claims of earlier runs (left in etcd) weigh on neither its memory
	// nor its start.
	opts.WatchNamespace = namespace
	return opts
}

// ModuleArgs describes ManagerOptions in the binary's flag names, for the
// report.
func (b *Bench) ModuleArgs(namespace string) []string {
	opts := b.ManagerOptions(namespace)
	return []string{
		"--enable-modules=ipam",
		"--ipam-concurrency=" + strconv.Itoa(opts.Concurrency[ipam.Name]),
		"--kube-api-qps=" + strconv.FormatFloat(float64(opts.KubeAPIQPS), 'g', -1, 32),
		"--kube-api-burst=" + strconv.Itoa(opts.KubeAPIBurst),
		"--namespace=" + opts.WatchNamespace,
		"--webhook-port=0", "--health-addr=0", "--diagnostics-address=0", "--insecure-diagnostics",
	}
}

// Run measures (a) with m raw creates, then (b) and (c) with n claims.
func (b *Bench) Run(ctx context.Context, n, m int) (RunResult, error) {
	res := RunResult{N: n, WindowSize: min(b.cfg.Window, n)}
	ctx, cancel := context.WithTimeoutCause(ctx, b.cfg.RunTimeout, fmt.Errorf("the run with N=%d took longer than %s", n, b.cfg.RunTimeout))
	defer cancel()

	rawNS, rawRate, err := b.rawCreateRate(ctx, m, b.cfg.Rate, b.cfg.Concurrency)
	if err != nil {
		return res, err
	}
	res.RawRate = rawRate
	b.progress("N=%d: (a) %d raw creates at %.1f/s", n, m, res.RawRate)
	rawUNS, rawURate, err := b.rawCreateRate(ctx, m, harness.Unthrottled, rawUnthrottledWorkers)
	if err != nil {
		return res, err
	}
	res.RawUnthrottledRate = rawURate
	b.progress("N=%d: (a′) %d raw creates at %.1f/s, unthrottled, %d goroutines", n, m, res.RawUnthrottledRate, rawUnthrottledWorkers)

	ns, err := b.env.CreateNamespace(ctx, "bench-ipam")
	if err != nil {
		return res, err
	}
	// Measure this run's memory alone: give back the garbage of the raw
	// creates and of earlier runs, then start the high-water mark afresh.
	runtime.GC()
	debug.FreeOSMemory()
	res.PeakReset = memstat.ResetPeak() == nil
	sampler := memstat.StartSampler(rssInterval)
	stopSampler := sync.OnceValues(sampler.Stop)
	defer func() { _, _ = stopSampler() }()

	requests := harness.NewRequests()
	b.feedRequests.Reset()
	stopModule, err := b.startModule(ctx, ns.Name, requests)
	if err != nil {
		return res, err
	}
	defer func() { _ = stopModule() }()
	pool, err := b.createPool(ctx, ns.Name)
	if err != nil {
		return res, err
	}

	tl, err := b.fulfil(ctx, ns.Name, n, &res)
	if err != nil {
		return res, err
	}
	res.Fulfilled = tl.Len()
	res.FulfilRate = tl.Rate()
	res.FirstWindow = tl.Elapsed(res.WindowSize)
	res.LastWindow = tl.Window(n, res.WindowSize)
	res.ModuleRequests, res.FeedRequests = requests.Snapshot(), b.feedRequests.Snapshot()
	res.WritesPerClaim = float64(writes(res.ModuleRequests)) / float64(n)

	if res.SampledRSS, err = stopSampler(); err != nil {
		return res, err
	}
	mem, err := memstat.Read()
	if err != nil {
		return res, err
	}
	res.PeakRSS = mem.Peak
	res.LoadAverage = harness.LoadAverage()
	rss, err := harness.ReadRSS()
	if err != nil {
		return res, err
	}
	delete(rss, harness.Self)
	res.ControlPlaneRSS = rss

	// The pool's counts lag behind the claims by a status patch or two.
	res.PoolUsed, err = b.poolUsed(ctx, pool, int64(n))
	if err != nil {
		return res, err
	}
	if err := stopModule(); err != nil {
		return res, fmt.Errorf("the module failed: %w", err)
	}
	if err := b.check(ctx, ns.Name, &res); err != nil {
		return res, err
	}
	if b.cfg.Cleanup {
		start := time.Now()
		if err := b.cleanup(ctx, ns.Name, rawNS, rawUNS); err != nil {
			return res, err
		}
		b.progress("N=%d: run's objects deleted in %s", n, time.Since(start).Round(time.Millisecond))
	}
	b.progress("N=%d: (b) %.1f claims/s, first %d in %s, last %d in %s, peak RSS %s MiB",
		n, res.FulfilRate, res.WindowSize, res.FirstWindow.Round(time.Millisecond), res.WindowSize, res.LastWindow.Round(time.Millisecond), memstat.MiB(res.PeakRSS))
	return res, nil
}

// rawUnthrottledWorkers is the number of goroutines of (a′).
const rawUnthrottledWorkers = 4

// writes counts the create, update, patch and delete requests in counts.
func writes(counts []harness.RequestCount) int {
	n := 0
	for _, rc := range counts {
		switch rc.Verb {
		case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
			n += rc.Count
		}
	}
	return n
}

// rawCreateRate creates m IPAddresses in a namespace of their own by
// workers goroutines sharing one client limited to rate, fresh so that its
// token bucket starts as full as the module's: (a) with the module's limit
// and Concurrency goroutines, (a′) unthrottled.
func (b *Bench) rawCreateRate(ctx context.Context, m int, rate harness.Rate, workers int) (string, float64, error) {
	ns, err := b.env.CreateNamespace(ctx, "bench-ipam-raw")
	if err != nil {
		return "", 0, err
	}
	c, err := harness.NewClient(b.env.Config, b.env.Scheme, rate)
	if err != nil {
		return "", 0, err
	}
	start := time.Now()
	err = harness.ForEach(ctx, m, workers, func(ctx context.Context, i int) error {
		a := rawAddress(ns.Name, i)
		if err := c.Create(ctx, a); err != nil {
			return fmt.Errorf("failed to create IPAddress %s: %w", a.Name, err)
		}
		return nil
	})
	if err != nil {
		return "", 0, err
	}
	return ns.Name, float64(m) / time.Since(start).Seconds(), nil
}

// rawAddress is shaped like the IPAddresses the module creates, without
// the owners and finalizer that would need a real claim and pool.
func rawAddress(ns string, i int) *ipamv1.IPAddress {
	b := netip.MustParseAddr("10.1.0.0").As4()
	binary.BigEndian.PutUint32(b[:], binary.BigEndian.Uint32(b[:])+uint32(i+1))
	addr := netip.AddrFrom4(b)
	name := fmt.Sprintf("raw-%05d", i)
	return &ipamv1.IPAddress{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: ipamv1.IPAddressSpec{
			ClaimRef: ipamv1.IPAddressClaimReference{Name: name},
			PoolRef:  ipamv1.IPPoolReference{APIGroup: v1alpha1.GroupVersion.Group, Kind: v1alpha1.MonolithIPPoolKind, Name: "raw"},
			Address:  addr.String(),
			Prefix:   ptr.To[int32](16),
		},
	}
}

// startModule starts the binary's manager with the ipam module alone, the
// way the binary does, and returns once its cache is synced. requests
// counts what the manager asks of the apiserver.
func (b *Bench) startModule(ctx context.Context, namespace string, requests *harness.Requests) (stop func() error, err error) {
	// Every run builds a new manager with the same controllers
	// (managertest.Options allows it).
	mgr, err := manager.New(ctx, requests.Wrap(b.env.Config), b.ManagerOptions(namespace), ipam.New(ipam.DefaultOptions()))
	if err != nil {
		return nil, fmt.Errorf("failed to build the manager: %w", err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(runCtx) }()
	stop = sync.OnceValue(func() error {
		cancel()
		return <-done
	})
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		return nil, errors.Join(errors.New("the manager's cache never synced"), stop(), context.Cause(ctx))
	}
	return stop, nil
}

// createPool creates the run's pool and waits for the pool reconciler to
// report it Ready, so that the module is running before the clock starts.
func (b *Bench) createPool(ctx context.Context, ns string) (*v1alpha1.MonolithIPPool, error) {
	pool := &v1alpha1.MonolithIPPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: poolName},
		Spec:       v1alpha1.IPPoolSpec{Addresses: []string{poolCIDR}, Prefix: poolPrefix},
	}
	if err := b.feed.Create(ctx, pool); err != nil {
		return nil, fmt.Errorf("failed to create the pool: %w", err)
	}
	err := wait.PollUntilContextTimeout(ctx, pollInterval, poolReadyTimeout, true, func(ctx context.Context) (bool, error) {
		if err := b.feed.Get(ctx, client.ObjectKeyFromObject(pool), pool); err != nil {
			return false, fmt.Errorf("failed to get the pool: %w", err)
		}
		return conditions.IsTrue(pool, v1alpha1.ReadyCondition), nil
	})
	if err != nil {
		return nil, fmt.Errorf("the pool did not become Ready: %w", err)
	}
	return pool, nil
}

// fulfil is (b) and (c): it creates n claims as fast as the unthrottled
// client goes and records when each is first seen fulfilled.
func (b *Bench) fulfil(ctx context.Context, ns string, n int, res *RunResult) (*harness.Timeline, error) {
	cpuBefore, err := harness.ReadCPUTimes()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	tl, err := b.createAndFollow(ctx, claimBatch{
		namespace: ns,
		count:     n,
		claim:     func(i int) *ipamv1.IPAddressClaim { return newClaim(ns, i) },
		fulfilled: func(c *ipamv1.IPAddressClaim) bool {
			return c.Status.AddressRef.Name != "" && conditions.IsTrue(c, ipamv1.IPAddressClaimReadyCondition)
		},
		created: func(d time.Duration) {
			res.CreateRate = float64(n) / d.Seconds()
			b.progress("N=%d: %d claims created at %.1f/s (unthrottled, %d goroutines)", n, n, res.CreateRate, b.cfg.CreateWorkers)
		},
		progress: func(done int, elapsed time.Duration) {
			b.progress("N=%d: %d/%d fulfilled after %s", n, done, n, elapsed)
		},
	})
	if err != nil {
		return nil, err
	}
	cpuAfter, err := harness.ReadCPUTimes()
	if err != nil {
		return nil, err
	}
	res.CPU, res.CPUWall = cpuAfter.Sub(cpuBefore), time.Since(start)
	return tl, nil
}

func newClaim(ns string, i int) *ipamv1.IPAddressClaim {
	return &ipamv1.IPAddressClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("claim-%05d", i)},
		Spec: ipamv1.IPAddressClaimSpec{PoolRef: ipamv1.IPPoolReference{
			APIGroup: v1alpha1.GroupVersion.Group, Kind: v1alpha1.MonolithIPPoolKind, Name: poolName,
		}},
	}
}

// poolUsed waits, within poolReadyTimeout, for the pool to count want
// addresses, and returns the count it last saw.
func (b *Bench) poolUsed(ctx context.Context, pool *v1alpha1.MonolithIPPool, want int64) (int64, error) {
	var used int64
	err := wait.PollUntilContextTimeout(ctx, pollInterval, poolReadyTimeout, true, func(ctx context.Context) (bool, error) {
		if err := b.feed.Get(ctx, client.ObjectKeyFromObject(pool), pool); err != nil {
			return false, fmt.Errorf("failed to get the pool: %w", err)
		}
		if s := pool.Status.IPAddresses; s != nil {
			used = s.Used
		}
		return used == want, nil
	})
	if err != nil && !wait.Interrupted(err) {
		return used, err
	}
	return used, nil // a wrong count is a problem for check to report
}

// check lists the run's IPAddresses and records what is wrong with them.
func (b *Bench) check(ctx context.Context, ns string, res *RunResult) error {
	prefix := netip.MustParsePrefix(poolCIDR)
	seen := map[netip.Addr]struct{}{}
	claims := map[string]struct{}{}
	var outside []string
	list := &ipamv1.IPAddressList{}
	for {
		if err := b.feed.List(ctx, list, client.InNamespace(ns), client.Limit(1000), client.Continue(list.Continue)); err != nil {
			return fmt.Errorf("failed to list the run's IPAddresses: %w", err)
		}
		for i := range list.Items {
			a := &list.Items[i]
			res.Addresses++
			claims[a.Spec.ClaimRef.Name] = struct{}{}
			addr, err := netip.ParseAddr(a.Spec.Address)
			if err != nil || !prefix.Contains(addr) {
				outside = append(outside, a.Spec.Address)
				continue
			}
			seen[addr] = struct{}{}
		}
		if list.Continue == "" {
			break
		}
	}
	res.Distinct = len(seen)
	problem := func(format string, args ...any) { res.Problems = append(res.Problems, fmt.Sprintf(format, args...)) }
	if res.Fulfilled != res.N {
		problem("%d of %d claims fulfilled", res.Fulfilled, res.N)
	}
	if res.Addresses != res.N || res.Distinct != res.N || len(claims) != res.N {
		problem("%d IPAddresses, %d distinct addresses, %d distinct claims for %d claims", res.Addresses, res.Distinct, len(claims), res.N)
	}
	if len(outside) > 0 {
		problem("%d addresses outside %s, e.g. %q", len(outside), poolCIDR, outside[0])
	}
	if res.PoolUsed != int64(res.N) {
		problem("the pool counts %d used addresses, want %d", res.PoolUsed, res.N)
	}
	return nil
}

// cleanup deletes what a run created. The module is stopped by then and
// envtest runs no namespace controller, so the finalizers are removed here
// and the objects deleted one collection at a time; the empty namespaces
// stay.
func (b *Bench) cleanup(ctx context.Context, ns string, rawNSs ...string) error {
	unfinalize := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))
	for _, kind := range []struct {
		list client.ObjectList
		obj  func(name string) client.Object
	}{
		{&ipamv1.IPAddressClaimList{}, func(name string) client.Object {
			return &ipamv1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		}},
		{&ipamv1.IPAddressList{}, func(name string) client.Object {
			return &ipamv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		}},
		{&v1alpha1.MonolithIPPoolList{}, func(name string) client.Object {
			return &v1alpha1.MonolithIPPool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		}},
	} {
		names, err := b.finalized(ctx, ns, kind.list)
		if err != nil {
			return err
		}
		err = harness.ForEach(ctx, len(names), b.cfg.CreateWorkers, func(ctx context.Context, i int) error {
			if err := b.feed.Patch(ctx, kind.obj(names[i]), unfinalize); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("failed to remove the finalizers of %T %s: %w", kind.list, names[i], err)
			}
			return nil
		})
		if err != nil {
			return err
		}
		if err := b.feed.DeleteAllOf(ctx, kind.obj(""), client.InNamespace(ns)); err != nil {
			return fmt.Errorf("failed to delete the run's %T: %w", kind.list, err)
		}
	}
	for _, rawNS := range rawNSs {
		if err := b.feed.DeleteAllOf(ctx, &ipamv1.IPAddress{}, client.InNamespace(rawNS)); err != nil {
			return fmt.Errorf("failed to delete the raw IPAddresses: %w", err)
		}
	}
	// The module's allocation records are cluster-scoped and would keep
	// the next run's addresses taken. Unstructured, so that the benchmark
	// also measures a module without them (the kind is then unknown).
	records := &unstructured.Unstructured{}
	records.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("MonolithIPAllocation"))
	if err := b.feed.DeleteAllOf(ctx, records); err != nil && !meta.IsNoMatchError(err) && !apierrors.IsNotFound(err) {
		return fmt.Errorf("failed to delete the allocation records: %w", err)
	}
	return nil
}

// finalized returns the names of the objects of list's kind in ns that
// have finalizers.
func (b *Bench) finalized(ctx context.Context, ns string, list client.ObjectList) ([]string, error) {
	var names []string
	for {
		if err := b.feed.List(ctx, list, client.InNamespace(ns), client.Limit(1000), client.Continue(list.GetContinue())); err != nil {
			return nil, fmt.Errorf("failed to list the run's %T: %w", list, err)
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return nil, fmt.Errorf("failed to read the items of %T: %w", list, err)
		}
		for _, item := range items {
			if o, ok := item.(client.Object); ok && len(o.GetFinalizers()) > 0 {
				names = append(names, o.GetName())
			}
		}
		if list.GetContinue() == "" {
			return names, nil
		}
	}
}
