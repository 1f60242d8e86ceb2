package failover

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/remote"

	"github.com/capi-monolith/capi-monolith/test/bench/harness/clusters"
	"github.com/capi-monolith/capi-monolith/test/bench/harness/process"
)

// The replicas' addresses (their pods' IPs) and the advertised host (the
// headless Service's name), which the test's clients resolve to both.
const (
	host     = "workload.failover.test"
	replicaA = "127.0.0.2"
	replicaB = "127.0.0.3"
)

// Leader election as the infrastructure bundle sets it.
var leaderElection = []string{
	"--leader-elect-lease-duration=8s",
	"--leader-elect-renew-deadline=6s",
	"--leader-elect-retry-period=1s",
}

const timeout = 60 * time.Second

type replica struct {
	address string
	p       *process.Process
}

// A client of the follower reaches the leader's workload API; after the
// leader's SIGKILL the survivor serves every cluster again, every object
// kept (same uid), and publishes itself as the leader.
func TestTheFollowerForwardsAndTakesOverWhenTheLeaderIsKilled(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := env.Namespace(t, "failover")
	binary, err := process.Build(ctx, t.TempDir())
	g.Expect(err).NotTo(HaveOccurred())
	first := 24000 + 100*rand.N(80)
	leaderLease := types.NamespacedName{Namespace: ns, Name: "workload-leader"}
	start := func(address string) *replica {
		args := append([]string{
			"--enable-modules=infra",
			"--leader-elect",
			"--leader-elect-namespace=" + ns,
			"--leader-elect-id=failover",
			"--inmemory-workload-address=" + address,
			"--inmemory-workload-advertise-host=" + host,
			fmt.Sprintf("--inmemory-workload-port-range=%d-%d", first, first+99),
			"--inmemory-workload-state=secrets",
			"--inmemory-workload-leader-lease=" + leaderLease.String(),
		}, leaderElection...)
		p, err := process.Start(ctx, process.Options{Binary: binary, Config: env.Config, Dir: filepath.Join(t.TempDir(), address), Args: args})
		g.Expect(err).NotTo(HaveOccurred())
		r := &replica{address: address, p: p}
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("replica %s's last output:\n%s", address, p.Log())
			}
			_ = p.Stop()
		})
		return r
	}
	a := start(replicaA)
	b := start(replicaB)

	// The leader publishes its address once it serves.
	var leader, follower *replica
	g.Eventually(func(g Gomega) {
		lease := &coordinationv1.Lease{}
		g.Expect(env.Client.Get(ctx, leaderLease, lease)).To(Succeed())
		switch ptr.Deref(lease.Spec.HolderIdentity, "") {
		case replicaA:
			leader, follower = a, b
		case replicaB:
			leader, follower = b, a
		default:
			g.Expect(lease.Spec.HolderIdentity).To(BeNil())
		}
		g.Expect(leader).NotTo(BeNil())
	}, timeout).Should(Succeed())

	cluster := createCluster(g, ctx, ns, "w")
	via := func(address string) kubernetes.Interface {
		cfg, err := remote.RESTConfig(ctx, "failover", env.Client, client.ObjectKeyFromObject(cluster))
		g.Expect(err).NotTo(HaveOccurred())
		cfg.Timeout = 5 * time.Second
		cfg.Dial = func(ctx context.Context, network, hostPort string) (net.Conn, error) {
			_, port, err := net.SplitHostPort(hostPort)
			if err != nil {
				return nil, err
			}
			var d net.Dialer
			return d.DialContext(ctx, network, net.JoinHostPort(address, port))
		}
		cs, err := kubernetes.NewForConfig(cfg)
		g.Expect(err).NotTo(HaveOccurred())
		return cs
	}

	// Writes through either replica land in the leader's store: the
	// follower forwards.
	const objects = 20
	uids := map[string]types.UID{}
	for i := range objects {
		r := leader
		if i%2 == 1 {
			r = follower
		}
		name := "cm-" + strconv.Itoa(i)
		g.Eventually(func(g Gomega) {
			cm, err := via(r.address).CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"i": strconv.Itoa(i)},
			}, metav1.CreateOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			uids[name] = cm.UID
		}, timeout).Should(Succeed(), "through %s", r.address)
	}
	list, err := via(follower.address).CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(list.Items).To(HaveLen(objects), "the follower's client sees the leader's store")

	// SIGKILL the leader: nothing flushed, no lease released.
	killed := time.Now()
	g.Expect(syscall.Kill(leader.p.PID(), syscall.SIGKILL)).To(Succeed())
	_ = leader.p.Stop()
	survivor := via(follower.address)
	g.Eventually(func(g Gomega) {
		list, err := survivor.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		got := map[string]types.UID{}
		for _, cm := range list.Items {
			got[cm.Name] = cm.UID
		}
		for name, uid := range uids {
			g.Expect(got).To(HaveKeyWithValue(name, uid))
		}
	}, timeout, 100*time.Millisecond).Should(Succeed(), "the survivor serves every object")
	failover := time.Since(killed)
	t.Logf("failover: %s from the leader's SIGKILL to the workload API answering with every object (lease 8s, renew 6s, retry 1s)", failover.Round(10*time.Millisecond))

	g.Eventually(func(g Gomega) {
		lease := &coordinationv1.Lease{}
		g.Expect(env.Client.Get(ctx, leaderLease, lease)).To(Succeed())
		g.Expect(lease.Spec.HolderIdentity).To(Equal(ptr.To(follower.address)))
	}, timeout).Should(Succeed())
	// And it writes.
	_, err = survivor.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after"}}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
}

// createCluster makes a served cluster (clusters.CreateServed) and checks
// that its endpoint is the advertised host.
func createCluster(g Gomega, ctx context.Context, ns, name string) *clusterv1.Cluster {
	cluster, err := clusters.CreateServed(ctx, env.Client, ns, name, timeout)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cluster.Spec.ControlPlaneEndpoint.Host).To(Equal(host))
	return cluster
}
