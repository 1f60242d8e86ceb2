package main

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sigs.k8s.io/cluster-api/controllers/remote"

	"github.com/capi-monolith/capi-monolith/test/bench/harness"
	"github.com/capi-monolith/capi-monolith/test/bench/harness/clusters"
	"github.com/capi-monolith/capi-monolith/test/bench/harness/process"
	"github.com/capi-monolith/capi-monolith/test/envtest"
)

// The replicas' addresses (their pods' IPs) and the advertised host (the
// headless Service's name); clients dial an address directly.
const (
	host     = "workload.failover.bench"
	replicaA = "127.0.0.2"
	replicaB = "127.0.0.3"
)

// labelStateOf labels every state Secret (secretjournal.LabelStateOf, an
// internal package).
const labelStateOf = "workload.capi-monolith.dev/state-of"

// leaderElection is what the infrastructure bundle sets.
var leaderElection = []string{
	"--leader-elect-lease-duration=8s",
	"--leader-elect-renew-deadline=6s",
	"--leader-elect-retry-period=1s",
}

// Config sizes one run.
type Config struct {
	Clusters int
	// Objects is the ConfigMaps written through each cluster's workload API.
	Objects int
	// Workers make the clusters and their objects in parallel.
	Workers int
	// Timeout bounds every wait (endpoints, writes, failover).
	Timeout time.Duration
}

// DefaultConfig is what `make bench-failover` runs for each size.
func DefaultConfig() Config {
	return Config{Objects: 20, Workers: 16, Timeout: 10 * time.Minute}
}

// Result is one run at cfg.Clusters.
type Result struct {
	Clusters, Objects int
	// StateSecrets and StateBytes are the state Secrets of every cluster
	// and the bytes of their data.
	StateSecrets, StateBytes int
	// Leases and Services are the namespace's, made by the replicas.
	Leases, Services int
	// Listening is the listening TCP sockets on each replica's address.
	ListeningLeader, ListeningFollower int
	// RSS of each replica before the kill (bytes).
	RSSLeader, RSSFollower uint64
	// RSSAfter is the survivor's once every cluster answered again.
	RSSAfter uint64
	// Elected is the kill to the manager's leader election Lease changing
	// holder; Published the kill to the workload Lease naming the survivor
	// (it publishes once it loaded and served every cluster).
	Elected, Published time.Duration
	// Answered is, per cluster, the kill to its workload API answering
	// through the survivor with every object (same uid).
	Answered []time.Duration
	// Lost is the objects missing or with another uid after failover.
	Lost int
	// Load is the load average before the kill.
	Load string
}

type cluster struct {
	name string
	uids map[string]types.UID
	cfg  func(ctx context.Context, address string) (kubernetes.Interface, error)
}

// Measure starts two replicas against env, makes cfg.Clusters clusters
// with cfg.Objects ConfigMaps each, SIGKILLs the leader and times the
// survivor's takeover.
func Measure(ctx context.Context, env *envtest.Environment, cfg Config) (Result, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	res := Result{Clusters: cfg.Clusters, Objects: cfg.Objects}
	dir, err := os.MkdirTemp("", "bench-failover-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	binary, err := process.Build(ctx, dir)
	if err != nil {
		return res, err
	}
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "failover-"}}
	if err := env.Client.Create(ctx, nsObj); err != nil {
		return res, fmt.Errorf("failed to create the namespace: %w", err)
	}
	ns := nsObj.Name
	// Below test/failover's ports (24000 and up), which may run at the
	// same time on the same addresses.
	first := 10000 + 1000*rand.N(10)
	leaderLease := types.NamespacedName{Namespace: ns, Name: "workload-leader"}
	electionLease := types.NamespacedName{Namespace: ns, Name: "failover"}
	procs := map[string]*process.Process{}
	defer func() {
		for _, p := range procs {
			_ = p.Stop()
		}
	}()
	for _, address := range []string{replicaA, replicaB} {
		args := append([]string{
			"--enable-modules=infra",
			"--leader-elect",
			"--leader-elect-namespace=" + ns,
			"--leader-elect-id=" + electionLease.Name,
			"--inmemory-workload-address=" + address,
			"--inmemory-workload-advertise-host=" + host,
			fmt.Sprintf("--inmemory-workload-port-range=%d-%d", first, first+cfg.Clusters+99),
			"--inmemory-workload-state=secrets",
			"--inmemory-workload-leader-lease=" + leaderLease.String(),
		}, leaderElection...)
		p, err := process.Start(ctx, process.Options{Binary: binary, Config: env.Config, Dir: filepath.Join(dir, address), Args: args})
		if err != nil {
			return res, err
		}
		procs[address] = p
	}
	holder := func(key types.NamespacedName) string {
		lease := &coordinationv1.Lease{}
		if err := env.Client.Get(ctx, key, lease); err != nil {
			return ""
		}
		return ptr.Deref(lease.Spec.HolderIdentity, "")
	}
	var leader, follower string
	if err := poll(ctx, cfg.Timeout, 100*time.Millisecond, func() bool {
		leader = holder(leaderLease)
		return leader == replicaA || leader == replicaB
	}); err != nil {
		return res, fmt.Errorf("no replica published itself as the leader: %w", err)
	}
	follower = replicaA
	if leader == replicaA {
		follower = replicaB
	}

	progress("replicas up, %s leads; making %d clusters", leader, cfg.Clusters)
	clusters := make([]*cluster, cfg.Clusters)
	if err := harness.ForEach(ctx, cfg.Clusters, cfg.Workers, func(ctx context.Context, i int) error {
		cl, err := createCluster(ctx, env.Client, ns, fmt.Sprintf("c%d", i), cfg.Timeout)
		if err != nil {
			return err
		}
		clusters[i] = cl
		for j := range cfg.Objects {
			name := "cm-" + strconv.Itoa(j)
			if err := poll(ctx, cfg.Timeout, 200*time.Millisecond, func() bool {
				cs, err := cl.cfg(ctx, leader)
				if err != nil {
					return false
				}
				cm, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{
					ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"j": strconv.Itoa(j)},
				}, metav1.CreateOptions{})
				if err != nil {
					return false
				}
				cl.uids[name] = cm.UID
				return true
			}); err != nil {
				return fmt.Errorf("failed to write %s into cluster %s: %w", name, cl.name, err)
			}
		}
		return nil
	}); err != nil {
		return res, err
	}

	// What the design keeps in the management cluster.
	secrets := &corev1.SecretList{}
	if err := env.Client.List(ctx, secrets, client.InNamespace(ns), client.HasLabels{labelStateOf}); err != nil {
		return res, fmt.Errorf("failed to list state Secrets: %w", err)
	}
	res.StateSecrets = len(secrets.Items)
	for _, s := range secrets.Items {
		for _, v := range s.Data {
			res.StateBytes += len(v)
		}
	}
	leases := &coordinationv1.LeaseList{}
	if err := env.Client.List(ctx, leases, client.InNamespace(ns)); err != nil {
		return res, err
	}
	res.Leases = len(leases.Items)
	services := &corev1.ServiceList{}
	if err := env.Client.List(ctx, services, client.InNamespace(ns)); err != nil {
		return res, err
	}
	res.Services = len(services.Items)
	progress("clusters made and written")
	// A follower opens the ports of the MonolithClusters it lists every
	// 15 s: wait for all of them, as a pod running for a while would.
	if err := poll(ctx, cfg.Timeout, time.Second, func() bool {
		n, err := listening(follower)
		return err == nil && n >= cfg.Clusters
	}); err != nil {
		return res, fmt.Errorf("the follower does not listen on every endpoint: %w", err)
	}
	if res.ListeningLeader, err = listening(leader); err != nil {
		return res, err
	}
	if res.ListeningFollower, err = listening(follower); err != nil {
		return res, err
	}
	if m, err := procs[leader].Memory(); err == nil {
		res.RSSLeader = m.Current
	}
	if m, err := procs[follower].Memory(); err == nil {
		res.RSSFollower = m.Current
	}

	// Clients of the survivor, made before the kill: reading the kubeconfig
	// Secrets is not part of the failover.
	survivor := make([]kubernetes.Interface, len(clusters))
	for i, cl := range clusters {
		if survivor[i], err = cl.cfg(ctx, follower); err != nil {
			return res, err
		}
	}
	elected := holder(electionLease)
	res.Load = harness.LoadAverage()

	progress("killing the leader")
	killed := time.Now()
	if err := syscall.Kill(procs[leader].PID(), syscall.SIGKILL); err != nil {
		return res, fmt.Errorf("failed to kill the leader: %w", err)
	}
	_ = procs[leader].Stop()
	delete(procs, leader)

	var wg sync.WaitGroup
	wg.Go(func() {
		_ = poll(ctx, cfg.Timeout, 50*time.Millisecond, func() bool {
			if h := holder(electionLease); h != "" && h != elected && res.Elected == 0 {
				res.Elected = time.Since(killed)
			}
			if holder(leaderLease) == follower {
				res.Published = time.Since(killed)
				return true
			}
			return false
		})
	})
	answered := make([]time.Duration, len(clusters))
	lost := make([]int, len(clusters))
	pending := make([]int, len(clusters))
	for i := range pending {
		pending[i] = i
	}
	deadline := killed.Add(cfg.Timeout)
	for len(pending) > 0 && time.Now().Before(deadline) {
		var mu sync.Mutex
		var still []int
		_ = harness.ForEach(ctx, len(pending), 64, func(ctx context.Context, k int) error {
			i := pending[k]
			list, err := survivor[i].CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
			if err == nil {
				missing := 0
				got := map[string]types.UID{}
				for _, cm := range list.Items {
					got[cm.Name] = cm.UID
				}
				for name, uid := range clusters[i].uids {
					if got[name] != uid {
						missing++
					}
				}
				// An answer is the end of the wait: a missing object is
				// lost, not late (the survivor serves only once loaded).
				answered[i], lost[i] = time.Since(killed), missing
				return nil
			}
			mu.Lock()
			still = append(still, i)
			mu.Unlock()
			return nil
		})
		pending = still
		if len(pending) > 0 {
			select {
			case <-ctx.Done():
				return res, ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	wg.Wait()
	if len(pending) > 0 {
		return res, fmt.Errorf("%d of %d clusters did not answer through the survivor within %s", len(pending), len(clusters), cfg.Timeout)
	}
	res.Answered = answered
	for _, l := range lost {
		res.Lost += l
	}
	if m, err := procs[follower].Memory(); err == nil {
		res.RSSAfter = m.Current
	}
	return res, nil
}

// createCluster makes a served cluster (clusters.CreateServed) and a way to
// dial its workload API at one replica's address.
func createCluster(ctx context.Context, c client.Client, ns, name string, timeout time.Duration) (*cluster, error) {
	cl, err := clusters.CreateServed(ctx, c, ns, name, timeout)
	if err != nil {
		return nil, err
	}
	out := &cluster{name: name, uids: map[string]types.UID{}}
	out.cfg = func(ctx context.Context, address string) (kubernetes.Interface, error) {
		cfg, err := remote.RESTConfig(ctx, "bench-failover", c, client.ObjectKeyFromObject(cl))
		if err != nil {
			return nil, err
		}
		cfg.Timeout = 5 * time.Second
		cfg.Dial = func(ctx context.Context, network, hostPort string) (net.Conn, error) {
			_, port, err := net.SplitHostPort(hostPort)
			if err != nil {
				return nil, err
			}
			var d net.Dialer
			return d.DialContext(ctx, network, net.JoinHostPort(address, port))
		}
		return kubernetes.NewForConfig(cfg)
	}
	return out, nil
}

// poll calls done every interval until it returns true, for at most timeout.
func poll(ctx context.Context, timeout, interval time.Duration, done func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for !done() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
	}
	return nil
}

// listening counts the listening TCP sockets bound to the IPv4 address.
func listening(address string) (int, error) {
	ip := net.ParseIP(address).To4()
	want := fmt.Sprintf("%02X%02X%02X%02X:", ip[3], ip[2], ip[1], ip[0])
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		return 0, fmt.Errorf("failed to read the listening sockets: %w", err)
	}
	defer f.Close()
	n := 0
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		// local_address is field 1, st field 3 (0A: LISTEN).
		if len(fields) > 3 && strings.HasPrefix(fields[1], want) && fields[3] == "0A" {
			n++
		}
	}
	return n, s.Err()
}

// progress tells the benchmark's runner where it is.
func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format(time.TimeOnly)}, args...)...)
}
