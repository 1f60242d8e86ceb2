package docker

import (
	"context"
	"encoding/base64"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/infra/internal/backend"
)

// These tests run against the real Docker Engine of the environment, with
// the images of hack/docker-test-images.

func TestReconcileClusterCreatesTheNetworkAndAReachableLoadBalancer(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx, cancel := testContext(t)
	defer cancel()
	b := newTestBackend(t)
	env := newTestEnv(t, b)

	_, found, err := b.findNetwork(ctx, env.network)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(BeFalse(), "the network does not exist before")

	status, err := b.ReconcileCluster(ctx, env.clusterSpec())
	g.Expect(err).NotTo(HaveOccurred())

	n, found, err := b.findNetwork(ctx, env.network)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(BeTrue(), "the network is created when missing")
	g.Expect(n.Labels).To(HaveKeyWithValue(LabelCreatedBy, CreatedByValue))
	info := toNetworkInfo(n)

	lbs := env.containers(g, ctx, map[string]string{v1alpha1.DockerLabelRole: v1alpha1.DockerRoleLoadBalancer})
	g.Expect(lbs).To(HaveLen(1))
	lb := env.loadBalancer(g, ctx)
	g.Expect(lb.State.Running).To(BeTrue())
	g.Expect(lb.Config.Labels).To(HaveKeyWithValue(labelPinned, "true"))

	// The endpoint is the load balancer's address on the network, port 6443.
	g.Expect(status.Endpoint.Port).To(BeEquivalentTo(APIServerPort))
	g.Expect(status.Endpoint.Host).To(Equal(addressOn(lb, env.network).String()))
	g.Expect(info.contains(addressOn(lb, env.network))).To(BeTrue())

	// The published host port accepts connections.
	hostPort, err := b.LoadBalancerHostPort(ctx, env.cluster)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(hostPort).To(BeNumerically(">", 0))
	g.Eventually(func() error {
		conn, err := net.DialTimeout("tcp", net.JoinHostPort(DefaultLoadBalancerHostIP, strconv.Itoa(hostPort)), time.Second)
		if err != nil {
			return err
		}
		return conn.Close()
	}).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())

	// The configuration the backend wrote passes a real haproxy's check.
	cfg := env.sh(g, ctx, lb.ID, "cat "+HAProxyConfigPath)
	g.Expect(cfg).To(Equal(RenderHAProxyConfig(nil)))
	env.sh(g, ctx, lb.ID, "haproxy -c -f "+HAProxyConfigPath)

	// Again: same endpoint, same load balancer, same host port.
	again, err := b.ReconcileCluster(ctx, env.clusterSpec())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again).To(Equal(status))
	g.Expect(env.containers(g, ctx, map[string]string{v1alpha1.DockerLabelRole: v1alpha1.DockerRoleLoadBalancer})).To(HaveLen(1))
	g.Expect(env.loadBalancer(g, ctx).ID).To(Equal(lb.ID))
	g.Expect(b.LoadBalancerHostPort(ctx, env.cluster)).To(Equal(hostPort))
}

func TestReconcileClusterPublishesTheLoadBalancerOnTheHostPortAsked(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx, cancel := testContext(t)
	defer cancel()
	b := newTestBackend(t)
	env := newTestEnv(t, b)

	// A port that is free now.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	port := l.Addr().(*net.TCPAddr).Port
	g.Expect(l.Close()).To(Succeed())

	spec := env.clusterSpec()
	spec.Backend.Docker.LoadBalancerHostPort = int32(port)
	_, err = b.ReconcileCluster(ctx, spec)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(b.LoadBalancerHostPort(ctx, env.cluster)).To(Equal(port))
	g.Eventually(func() error {
		conn, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), time.Second)
		if err != nil {
			return err
		}
		return conn.Close()
	}).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
}

func TestEnsureNodeCreatesOneContainerPerMachine(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx, cancel := testContext(t)
	defer cancel()
	b := newTestBackend(t)
	env := newTestEnv(t, b)
	_, err := b.ReconcileCluster(ctx, env.clusterSpec())
	g.Expect(err).NotTo(HaveOccurred())

	node, err := b.EnsureNode(ctx, env.nodeSpec("worker-1", false))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(node.Provisioned).To(BeTrue())
	name := containerName(env.cluster.Namespace, env.cluster.Name, "worker-1")
	g.Expect(node.ProviderID).To(Equal("docker:////" + name))
	g.Expect(node.Addresses).To(ContainElement(HaveField("Address", name)))

	c := env.nodeContainer(g, ctx, "worker-1")
	g.Expect(c.Config.Labels).To(HaveKeyWithValue(v1alpha1.DockerLabelRole, v1alpha1.DockerRoleWorker))
	g.Expect(c.Config.Labels).To(HaveKeyWithValue(v1alpha1.DockerLabelMachine, "worker-1"))
	g.Expect(env.networkInfo(g, ctx).contains(addressOn(c, env.network))).To(BeTrue())

	again, err := b.EnsureNode(ctx, env.nodeSpec("worker-1", false))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again).To(Equal(node), "a second call returns the same node")
	g.Expect(env.containers(g, ctx, map[string]string{v1alpha1.DockerLabelMachine: "worker-1"})).To(HaveLen(1), "exactly one container per machine")
}

func TestEnsureNodeConcurrentCallsMakeOneContainer(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx, cancel := testContext(t)
	defer cancel()
	b := newTestBackend(t)
	other := newTestBackend(t) // another manager, sharing nothing in memory
	env := newTestEnv(t, b)
	_, err := b.ReconcileCluster(ctx, env.clusterSpec())
	g.Expect(err).NotTo(HaveOccurred())

	var wg sync.WaitGroup
	ids := make([]string, 4)
	errs := make([]error, 4)
	for i := range 4 {
		wg.Go(func() {
			be := b
			if i%2 == 1 {
				be = other
			}
			node, err := be.EnsureNode(ctx, env.nodeSpec("racy", false))
			ids[i], errs[i] = node.ProviderID, err
		})
	}
	wg.Wait()
	for i := range 4 {
		g.Expect(errs[i]).NotTo(HaveOccurred())
		g.Expect(ids[i]).To(Equal(ids[0]))
	}
	g.Expect(env.containers(g, ctx, map[string]string{v1alpha1.DockerLabelMachine: "racy"})).To(HaveLen(1))
}

func TestEnsureNodeHonoursStaticAddresses(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx, cancel := testContext(t)
	defer cancel()
	b := newTestBackend(t)
	env := newTestEnv(t, b)
	_, err := b.ReconcileCluster(ctx, env.clusterSpec())
	g.Expect(err).NotTo(HaveOccurred())
	n := env.networkInfo(g, ctx)

	t.Run("an address inside the network's subnet is the node's address", func(t *testing.T) {
		g := NewWithT(t)
		want := addressIn(g, n, 200)
		node, err := b.EnsureNode(ctx, env.nodeSpec("static", false, backend.StaticAddress{Address: want, Prefix: n.Subnets[0].Bits()}))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(node.Addresses).To(ContainElement(HaveField("Address", want.String())))
		g.Expect(addressOn(env.nodeContainer(g, ctx, "static"), env.network)).To(Equal(want))
	})

	t.Run("an address outside the network's subnet is a clear error and makes nothing", func(t *testing.T) {
		g := NewWithT(t)
		outside := n.Subnets[0].Addr().Prev()
		_, err := b.EnsureNode(ctx, env.nodeSpec("outside", false, backend.StaticAddress{Address: outside, Prefix: 24}))
		g.Expect(err).To(MatchError(And(
			ContainSubstring(outside.String()),
			ContainSubstring("outside the subnets"),
			ContainSubstring(env.network),
		)))
		g.Expect(env.containers(g, ctx, map[string]string{v1alpha1.DockerLabelMachine: "outside"})).To(BeEmpty())
	})
}

func TestLoadBalancerFollowsTheControlPlaneNodes(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx, cancel := testContext(t)
	defer cancel()
	b := newTestBackend(t)
	env := newTestEnv(t, b)
	_, err := b.ReconcileCluster(ctx, env.clusterSpec())
	g.Expect(err).NotTo(HaveOccurred())
	lb := env.loadBalancer(g, ctx)
	// haproxy logs its first load a moment after the container starts.
	var loads int
	g.Eventually(func(g Gomega) int {
		loads = env.haproxyLoads(g, ctx, lb.ID)
		return loads
	}).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(BeNumerically(">=", 1))

	for _, m := range []string{"cp-1", "cp-2"} {
		_, err := b.EnsureNode(ctx, env.nodeSpec(m, true))
		g.Expect(err).NotTo(HaveOccurred())
	}
	_, err = b.EnsureNode(ctx, env.nodeSpec("worker", false))
	g.Expect(err).NotTo(HaveOccurred())

	cp1 := env.nodeContainer(g, ctx, "cp-1")
	cp2 := env.nodeContainer(g, ctx, "cp-2")
	worker := env.nodeContainer(g, ctx, "worker")
	server := func(c interface{ String() string }) string { return " " + c.String() + ":6443 " }

	cfg := env.sh(g, ctx, lb.ID, "cat "+HAProxyConfigPath)
	g.Expect(cfg).To(ContainSubstring(server(addressOn(cp1, env.network))))
	g.Expect(cfg).To(ContainSubstring(server(addressOn(cp2, env.network))))
	g.Expect(cfg).NotTo(ContainSubstring(server(addressOn(worker, env.network))), "workers are not behind the load balancer")
	env.sh(g, ctx, lb.ID, "haproxy -c -f "+HAProxyConfigPath)
	// haproxy reloaded the new configuration and still runs.
	g.Eventually(func(g Gomega) int { return env.haproxyLoads(g, ctx, lb.ID) }).
		WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(BeNumerically(">", loads))
	g.Expect(env.loadBalancer(g, ctx).State.Running).To(BeTrue())
	g.Expect(env.loadBalancer(g, ctx).ID).To(Equal(lb.ID))
	loads = env.haproxyLoads(g, ctx, lb.ID)

	// A node that comes back with another address (Docker restarted it)
	// is found at the new one on the next reconcile.
	n := env.networkInfo(g, ctx)
	moved := addressIn(g, n, 201)
	_, err = b.client.NetworkDisconnect(ctx, n.ID, client.NetworkDisconnectOptions{Container: cp2.ID, Force: true})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = b.client.NetworkConnect(ctx, n.ID, client.NetworkConnectOptions{Container: cp2.ID, EndpointConfig: &network.EndpointSettings{
		IPAMConfig: &network.EndpointIPAMConfig{IPv4Address: moved},
	}})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = b.ReconcileCluster(ctx, env.clusterSpec())
	g.Expect(err).NotTo(HaveOccurred())
	cfg = env.sh(g, ctx, lb.ID, "cat "+HAProxyConfigPath)
	g.Expect(cfg).To(ContainSubstring(server(moved)))
	g.Expect(cfg).NotTo(ContainSubstring(server(addressOn(cp2, env.network))))
	g.Eventually(func(g Gomega) int { return env.haproxyLoads(g, ctx, lb.ID) }).
		WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(BeNumerically(">", loads))

	// A deleted control plane node leaves the load balancer.
	g.Expect(b.DeleteNode(ctx, env.machine("cp-1"))).To(Succeed())
	cfg = env.sh(g, ctx, lb.ID, "cat "+HAProxyConfigPath)
	g.Expect(cfg).NotTo(ContainSubstring(server(addressOn(cp1, env.network))))
	g.Expect(cfg).To(ContainSubstring(server(moved)))
	env.sh(g, ctx, lb.ID, "haproxy -c -f "+HAProxyConfigPath)
}

func TestBootstrap(t *testing.T) {
	t.Parallel()
	ctx, cancel := testContext(t)
	defer cancel()
	b := newTestBackend(t)
	env := newTestEnv(t, b)
	_, err := b.ReconcileCluster(ctx, env.clusterSpec())
	NewWithT(t).Expect(err).NotTo(HaveOccurred())

	t.Run("files are written with their encoding and mode, commands run, and a second run does nothing", func(t *testing.T) {
		g := NewWithT(t)
		_, err := b.EnsureNode(ctx, env.nodeSpec("boot", true))
		g.Expect(err).NotTo(HaveOccurred())
		secret := "-----BEGIN KEY-----\nnot really\n-----END KEY-----\n"
		data := "## template: jinja\n#cloud-config\n" +
			"write_files:\n" +
			"- path: /etc/kubernetes/pki/ca.key\n" +
			"  encoding: b64\n" +
			"  permissions: '0600'\n" +
			"  owner: root:root\n" +
			"  content: " + base64.StdEncoding.EncodeToString([]byte(secret)) + "\n" +
			"- path: /run/kubeadm/kubeadm.yaml\n" +
			"  content: |\n" +
			"    name: {{ ds.meta_data.hostname }}\n" +
			"- path: /run/kubeadm/kubeadm.yaml\n" +
			"  append: true\n" +
			"  content: |\n" +
			"    appended: true\n" +
			"runcmd:\n" +
			"- echo ran >> /root/runs\n" +
			"- [sh, -c, 'echo \"$0\" > /root/list-form', 'it works']\n" +
			"- mkdir -p /run/cluster-api && echo success > " + BootstrapSentinelFile + "\n"
		var messages []string
		err = b.Bootstrap(ctx, env.machine("boot"), backend.BootstrapData{Value: []byte(data), Format: "cloud-config"}, func(m string) { messages = append(messages, m) })
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(messages).To(ContainElements("writing file 1 of 3", "running command 2 of 3", "running command 3 of 3"))

		c := env.nodeContainer(g, ctx, "boot")
		g.Expect(env.sh(g, ctx, c.ID, "cat /etc/kubernetes/pki/ca.key")).To(Equal(secret))
		g.Expect(env.sh(g, ctx, c.ID, "stat -c %a:%U /etc/kubernetes/pki/ca.key")).To(Equal("600:root\n"))
		g.Expect(env.sh(g, ctx, c.ID, "stat -c %a /run/kubeadm/kubeadm.yaml")).To(Equal("644\n"))
		g.Expect(env.sh(g, ctx, c.ID, "cat /run/kubeadm/kubeadm.yaml")).To(Equal("name: " + containerNameOf(c) + "\nappended: true\n"))
		g.Expect(env.sh(g, ctx, c.ID, "cat /root/list-form")).To(Equal("it works\n"))
		g.Expect(env.sh(g, ctx, c.ID, "cat /root/runs")).To(Equal("ran\n"))

		// Second run: the sentinel says it is done; nothing is written.
		env.sh(g, ctx, c.ID, "rm /etc/kubernetes/pki/ca.key")
		messages = nil
		err = b.Bootstrap(ctx, env.machine("boot"), backend.BootstrapData{Value: []byte(data)}, func(m string) { messages = append(messages, m) })
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(messages).To(BeEmpty())
		g.Expect(env.sh(g, ctx, c.ID, "cat /root/runs")).To(Equal("ran\n"))
		g.Expect(env.sh(g, ctx, c.ID, "test -e /etc/kubernetes/pki/ca.key || echo absent")).To(Equal("absent\n"))

		// The node restarted: /run is empty again, the data still ran once.
		env.sh(g, ctx, c.ID, "rm "+BootstrapSentinelFile)
		err = b.Bootstrap(ctx, env.machine("boot"), backend.BootstrapData{Value: []byte(data)}, nil)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(env.sh(g, ctx, c.ID, "cat /root/runs")).To(Equal("ran\n"))
	})

	t.Run("a failing command stops the run with an error naming it, its exit code and its output", func(t *testing.T) {
		g := NewWithT(t)
		_, err := b.EnsureNode(ctx, env.nodeSpec("fails", false))
		g.Expect(err).NotTo(HaveOccurred())
		data := "#cloud-config\nruncmd:\n- 'true'\n- echo something broke >&2; exit 7\n- touch /root/after\n"
		err = b.Bootstrap(ctx, env.machine("fails"), backend.BootstrapData{Value: []byte(data)}, nil)
		var cmdErr *CommandError
		g.Expect(errors.As(err, &cmdErr)).To(BeTrue(), "error %v is a CommandError", err)
		g.Expect(cmdErr.ExitCode).To(Equal(7))
		g.Expect(cmdErr.Step).To(Equal(2))
		g.Expect(err.Error()).To(And(
			ContainSubstring("echo something broke >&2; exit 7"),
			ContainSubstring("exited with code 7"),
			ContainSubstring("something broke"),
		))
		c := env.nodeContainer(g, ctx, "fails")
		g.Expect(env.sh(g, ctx, c.ID, "test -e /root/after || echo absent")).To(Equal("absent\n"), "later commands do not run")
	})

	t.Run("data that does not write the sentinel is a failure", func(t *testing.T) {
		g := NewWithT(t)
		_, err := b.EnsureNode(ctx, env.nodeSpec("nosentinel", false))
		g.Expect(err).NotTo(HaveOccurred())
		err = b.Bootstrap(ctx, env.machine("nosentinel"), backend.BootstrapData{Value: []byte("runcmd:\n- 'true'\n")}, nil)
		g.Expect(err).To(MatchError(ContainSubstring("did not write " + BootstrapSentinelFile)))
	})

	t.Run("ignition data is rejected", func(t *testing.T) {
		g := NewWithT(t)
		err := b.Bootstrap(ctx, env.machine("boot"), backend.BootstrapData{Value: []byte(`{"ignition":{"version":"3.4.0"}}`), Format: "ignition"}, nil)
		g.Expect(err).To(MatchError(ErrIgnitionUnsupported))
		g.Expect(err.Error()).To(Equal("ignition bootstrap data is not supported by the docker backend"))
	})

	t.Run("a cancelled context stops a running command", func(t *testing.T) {
		g := NewWithT(t)
		_, err := b.EnsureNode(ctx, env.nodeSpec("slow", false))
		g.Expect(err).NotTo(HaveOccurred())
		short, cancelShort := context.WithTimeout(ctx, 2*time.Second)
		defer cancelShort()
		start := time.Now()
		err = b.Bootstrap(short, env.machine("slow"), backend.BootstrapData{Value: []byte("runcmd:\n- sleep 600\n")}, nil)
		g.Expect(err).To(MatchError(context.DeadlineExceeded))
		g.Expect(time.Since(start)).To(BeNumerically("<", 30*time.Second))
	})

	t.Run("a machine without a node is an error", func(t *testing.T) {
		g := NewWithT(t)
		err := b.Bootstrap(ctx, env.machine("missing"), backend.BootstrapData{Value: []byte("runcmd: []\n")}, nil)
		g.Expect(err).To(MatchError(ContainSubstring("has no node container")))
	})
}

func TestDeleteNodeAndDeleteClusterLeaveNothingBehind(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx, cancel := testContext(t)
	defer cancel()
	b := newTestBackend(t)
	env := newTestEnv(t, b)
	_, err := b.ReconcileCluster(ctx, env.clusterSpec())
	g.Expect(err).NotTo(HaveOccurred())
	for _, m := range []string{"cp", "worker"} {
		_, err := b.EnsureNode(ctx, env.nodeSpec(m, m == "cp"))
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(env.containers(g, ctx, nil)).To(HaveLen(3))

	g.Expect(b.DeleteNode(ctx, env.machine("worker"))).To(Succeed())
	g.Expect(env.containers(g, ctx, map[string]string{v1alpha1.DockerLabelMachine: "worker"})).To(BeEmpty())
	g.Expect(b.DeleteNode(ctx, env.machine("worker"))).To(Succeed(), "deleting a deleted node is fine")

	g.Expect(b.DeleteCluster(ctx, env.cluster)).To(Succeed())
	g.Expect(env.containers(g, ctx, nil)).To(BeEmpty())
	_, found, err := b.findNetwork(ctx, env.network)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(BeFalse(), "the network the backend created is gone")
	g.Expect(b.DeleteCluster(ctx, env.cluster)).To(Succeed(), "deleting a deleted cluster is fine")
}

func TestDeleteClusterKeepsNetworksItDidNotCreate(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx, cancel := testContext(t)
	defer cancel()
	b := newTestBackend(t)
	env := newTestEnv(t, b)
	// The user's network, like kind's.
	_, err := b.client.NetworkCreate(ctx, env.network, client.NetworkCreateOptions{Driver: "bridge"})
	g.Expect(err).NotTo(HaveOccurred())

	_, err = b.ReconcileCluster(ctx, env.clusterSpec())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(b.DeleteCluster(ctx, env.cluster)).To(Succeed())
	g.Expect(env.containers(g, ctx, nil)).To(BeEmpty())
	n, found, err := b.findNetwork(ctx, env.network)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(BeTrue(), "a network the backend did not create stays")
	g.Expect(n.Labels).NotTo(HaveKey(LabelCreatedBy))
}

// Two management clusters on one Engine (two `dev` runs, dev and the tests)
// may hold clusters of the same namespace and names on the same network:
// each finds, lists and deletes only its own containers and networks.
func TestManagementClustersOnOneEngineDoNotSeeEachOthersObjects(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx, cancel := testContext(t)
	defer cancel()
	suffix := randomSuffix(t)
	a, b := newTestBackendOf(t, "mgmt-a-"+suffix), newTestBackendOf(t, "mgmt-b-"+suffix)
	envA := newTestEnv(t, a)
	envB := &testEnv{b: b, cluster: envA.cluster, network: envA.network}
	t.Cleanup(func() {
		cctx, ccancel := context.WithTimeout(context.Background(), time.Minute)
		defer ccancel()
		if err := b.DeleteCluster(cctx, envB.cluster); err != nil {
			t.Errorf("cleanup: failed to delete cluster %v of backend b: %v", envB.cluster, err)
		}
	})

	for _, env := range []*testEnv{envA, envB} {
		_, err := env.b.ReconcileCluster(ctx, env.clusterSpec())
		g.Expect(err).NotTo(HaveOccurred())
		_, err = env.b.EnsureNode(ctx, env.nodeSpec("cp", true))
		g.Expect(err).NotTo(HaveOccurred())
	}
	_, err := a.EnsureNode(ctx, envA.nodeSpec("worker", false))
	g.Expect(err).NotTo(HaveOccurred())

	idOf := map[*testEnv]string{envA: a.identity, envB: b.identity}
	for env, want := range map[*testEnv]int{envA: 3, envB: 2} {
		items := env.containers(g, ctx, nil)
		g.Expect(items).To(HaveLen(want), "backend %s sees its own containers only", idOf[env])
		for _, item := range items {
			g.Expect(item.Labels).To(HaveKeyWithValue(LabelManagementCluster, idOf[env]))
		}
	}
	g.Expect(envA.nodeContainer(g, ctx, "cp").ID).NotTo(Equal(envB.nodeContainer(g, ctx, "cp").ID))
	g.Expect(envA.loadBalancer(g, ctx).ID).NotTo(Equal(envB.loadBalancer(g, ctx).ID))
	nodesA, err := a.ListNodes(ctx, envA.cluster)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(nodesA).To(ConsistOf(envA.machine("cp"), envA.machine("worker")))
	nodesB, err := b.ListNodes(ctx, envB.cluster)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(nodesB).To(ConsistOf(envB.machine("cp")))
	g.Expect(envA.networkInfo(g, ctx).Name).To(Equal(envA.network))
	n, _, err := a.findNetwork(ctx, envA.network)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n.Labels).To(HaveKeyWithValue(LabelManagementCluster, a.identity), "the network carries its creator's identity")

	// b deletes its cluster: a's containers and network stay, running.
	g.Expect(b.DeleteCluster(ctx, envB.cluster)).To(Succeed())
	g.Expect(envB.containers(g, ctx, nil)).To(BeEmpty())
	g.Expect(envA.containers(g, ctx, nil)).To(HaveLen(3))
	for _, item := range envA.containers(g, ctx, nil) {
		g.Expect(item.State).To(BeEquivalentTo("running"), "container %v", item.Names)
	}
	_, found, err := a.findNetwork(ctx, envA.network)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(BeTrue(), "b does not remove a's network")

	// a deletes its own: nothing is left, the network included.
	g.Expect(a.DeleteCluster(ctx, envA.cluster)).To(Succeed())
	g.Expect(envA.containers(g, ctx, nil)).To(BeEmpty())
	_, found, err = a.findNetwork(ctx, envA.network)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(BeFalse())
}

func TestNewRejectsABadManagementClusterIdentity(t *testing.T) {
	g := NewWithT(t)
	for _, id := range []string{"a=b", "a,b", "with space", strings.Repeat("x", 64)} {
		_, err := New(Options{ManagementCluster: id, Client: &client.Client{}})
		g.Expect(err).To(MatchError(ContainSubstring("management cluster identity")), "identity %q", id)
	}
	g.Expect(ValidateManagementCluster("")).To(Succeed())
	g.Expect(ValidateManagementCluster("0b7b2a56-52b3-4d4e-9a43-7f2a3c1e7d10")).To(Succeed())
}

func TestARestartedManagerAdoptsTheContainersItFinds(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx, cancel := testContext(t)
	defer cancel()
	first := newTestBackend(t)
	env := newTestEnv(t, first)
	status, err := first.ReconcileCluster(ctx, env.clusterSpec())
	g.Expect(err).NotTo(HaveOccurred())
	cpNode, err := first.EnsureNode(ctx, env.nodeSpec("cp", true))
	g.Expect(err).NotTo(HaveOccurred())
	lb := env.loadBalancer(g, ctx)
	cp := env.nodeContainer(g, ctx, "cp")
	// The manager stopped mid-provisioning: a node created, not running.
	now := 0
	_, err = first.client.ContainerStop(ctx, cp.ID, client.ContainerStopOptions{Timeout: &now})
	g.Expect(err).NotTo(HaveOccurred())

	restarted := newTestBackend(t)
	again, err := restarted.ReconcileCluster(ctx, env.clusterSpec())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again).To(Equal(status))
	node, err := restarted.EnsureNode(ctx, env.nodeSpec("cp", true))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(node.ProviderID).To(Equal(cpNode.ProviderID))
	g.Expect(node.Provisioned).To(BeTrue(), "the adopted node is started again")

	g.Expect(env.containers(g, ctx, map[string]string{v1alpha1.DockerLabelRole: v1alpha1.DockerRoleLoadBalancer})).To(HaveLen(1))
	g.Expect(env.loadBalancer(g, ctx).ID).To(Equal(lb.ID))
	g.Expect(env.containers(g, ctx, map[string]string{v1alpha1.DockerLabelMachine: "cp"})).To(HaveLen(1))
	g.Expect(env.nodeContainer(g, ctx, "cp").ID).To(Equal(cp.ID))
	cfg := env.sh(g, ctx, lb.ID, "cat "+HAProxyConfigPath)
	g.Expect(strings.Count(cfg, "  server ")).To(Equal(1))
}

func TestEnsureNodePlacesTheNodeInItsFailureDomain(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx, cancel := testContext(t)
	defer cancel()
	b := newTestBackend(t)
	env := newTestEnv(t, b)
	_, err := b.ReconcileCluster(ctx, env.clusterSpec())
	g.Expect(err).NotTo(HaveOccurred())
	fdNetwork := env.network + "-fd-b"

	// A domain without a network: a label only.
	a := env.nodeSpec("in-a", false)
	a.FailureDomain = "fd-a"
	node, err := b.EnsureNode(ctx, a)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(node.FailureDomain).To(Equal("fd-a"))
	c := env.nodeContainer(g, ctx, "in-a")
	g.Expect(c.Config.Labels).To(HaveKeyWithValue(LabelFailureDomain, "fd-a"))
	g.Expect(c.NetworkSettings.Networks).To(HaveLen(1))

	// A domain with a network: the label and that network too; the
	// cluster's network still carries the node's address.
	bSpec := env.nodeSpec("in-b", false)
	bSpec.FailureDomain = "fd-b"
	bSpec.FailureDomainAttributes = map[string]string{v1alpha1.FailureDomainNetworkAttribute: fdNetwork}
	node, err = b.EnsureNode(ctx, bSpec)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(node.FailureDomain).To(Equal("fd-b"))
	c = env.nodeContainer(g, ctx, "in-b")
	g.Expect(c.Config.Labels).To(HaveKeyWithValue(LabelFailureDomain, "fd-b"))
	g.Expect(c.NetworkSettings.Networks).To(HaveKey(fdNetwork))
	g.Expect(addressOn(c, fdNetwork).IsValid()).To(BeTrue())
	g.Expect(node.Addresses).To(ContainElement(HaveField("Address", addressOn(c, env.network).String())))

	// No domain: no label.
	none, err := b.EnsureNode(ctx, env.nodeSpec("nowhere", false))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(none.FailureDomain).To(BeEmpty())
	g.Expect(env.nodeContainer(g, ctx, "nowhere").Config.Labels).NotTo(HaveKey(LabelFailureDomain))

	// The domain's network, made for the cluster, goes with it.
	g.Expect(b.DeleteCluster(ctx, env.cluster)).To(Succeed())
	_, found, err := b.findNetwork(ctx, fdNetwork)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(BeFalse())
}

// A reserved network (here host: nodes in the host's network namespace, the
// load balancer on every host interface) is refused by the backend too, for
// objects that bypassed the webhook: a terminal error and nothing created.
func TestReconcileClusterRefusesDockersPredefinedNetworks(t *testing.T) {
	t.Parallel()
	ctx, cancel := testContext(t)
	defer cancel()
	b := newTestBackend(t)
	env := newTestEnv(t, b)
	for _, name := range []string{"host", "none", "bridge", "default", "Host"} {
		g := NewWithT(t)
		spec := env.clusterSpec()
		spec.Backend.Docker.Network = name
		_, err := b.ReconcileCluster(ctx, spec)
		g.Expect(err).To(MatchError(ContainSubstring("one of Docker's predefined networks")), name)
		g.Expect(errors.Is(err, reconcile.TerminalError(nil))).To(BeTrue(), "%s: a terminal error", name)
		g.Expect(env.containers(g, ctx, nil)).To(BeEmpty(), "%s: no load balancer", name)
	}
}

// A killed (docker kill) node or load balancer is not started again by
// Docker: a kill counts as a manual stop, which even the unless-stopped
// restart policy respects. The next reconcile of a control-plane machine
// starts both again, on the addresses they had, so that a steady cluster
// whose cluster object nothing changes still heals (its machines are
// requeued; the cluster is not).
func TestKilledNodeAndLoadBalancerAreStartedByTheNextControlPlaneNodeReconcile(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx, cancel := testContext(t)
	defer cancel()
	b := newTestBackend(t)
	env := newTestEnv(t, b)
	_, err := b.ReconcileCluster(ctx, env.clusterSpec())
	g.Expect(err).NotTo(HaveOccurred())
	before, err := b.EnsureNode(ctx, env.nodeSpec("cp", true))
	g.Expect(err).NotTo(HaveOccurred())
	lb := env.loadBalancer(g, ctx)
	cp := env.nodeContainer(g, ctx, "cp")

	for _, id := range []string{lb.ID, cp.ID} {
		_, err := b.client.ContainerKill(ctx, id, client.ContainerKillOptions{Signal: "SIGKILL"})
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Eventually(func(g Gomega) {
		g.Expect(env.loadBalancer(g, ctx).State.Running).To(BeFalse())
		g.Expect(env.nodeContainer(g, ctx, "cp").State.Running).To(BeFalse())
	}).WithTimeout(30*time.Second).WithPolling(200*time.Millisecond).Should(Succeed(), "both containers stopped by the kill")

	after, err := b.EnsureNode(ctx, env.nodeSpec("cp", true))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(after.Provisioned).To(BeTrue(), "the killed node runs again")
	g.Expect(after.ProviderID).To(Equal(before.ProviderID))
	restarted := env.loadBalancer(g, ctx)
	g.Expect(restarted.State.Running).To(BeTrue(), "the killed load balancer runs again")
	g.Expect(restarted.ID).To(Equal(lb.ID), "started again, not replaced")
	g.Expect(addressOn(restarted, env.network)).To(Equal(addressOn(lb, env.network)), "the endpoint does not move")
	cfg := env.sh(g, ctx, restarted.ID, "cat "+HAProxyConfigPath)
	g.Expect(cfg).To(ContainSubstring(" " + addressOn(env.nodeContainer(g, ctx, "cp"), env.network).String() + ":6443 "))
}

// A network the backend creates keeps the lower half of its subnet out of
// Docker's dynamic addressing, and the load balancer's address comes from
// that half: a node created while the load balancer is stopped (killed,
// or during a Docker restart) cannot take it, and the load balancer starts
// again on it.
func TestNodesCreatedWhileTheLoadBalancerIsStoppedDoNotTakeItsAddress(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx, cancel := testContext(t)
	defer cancel()
	b := newTestBackend(t)
	env := newTestEnv(t, b)
	_, err := b.ReconcileCluster(ctx, env.clusterSpec())
	g.Expect(err).NotTo(HaveOccurred())
	n, found, err := b.findNetwork(ctx, env.network)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(BeTrue())
	subnet, dynamic, _, ok := toNetworkInfo(n).staticRange()
	g.Expect(ok).To(BeTrue(), "the created network keeps a static half: %+v", n.IPAM.Config)
	g.Expect(dynamic).To(Equal(dynamicRange(subnet)))

	lb := env.loadBalancer(g, ctx)
	address := addressOn(lb, env.network)
	g.Expect(subnet.Contains(address)).To(BeTrue())
	g.Expect(dynamic.Contains(address)).To(BeFalse(), "the load balancer's address %s is outside the dynamic range %s", address, dynamic)

	_, err = b.client.ContainerKill(ctx, lb.ID, client.ContainerKillOptions{Signal: "SIGKILL"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) {
		g.Expect(env.loadBalancer(g, ctx).State.Running).To(BeFalse())
	}).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())

	// Nodes made while it is down get dynamic addresses, never its own.
	for _, name := range []string{"w1", "w2"} {
		_, err := b.EnsureNode(ctx, env.nodeSpec(name, false))
		g.Expect(err).NotTo(HaveOccurred())
		addr := addressOn(env.nodeContainer(g, ctx, name), env.network)
		g.Expect(dynamic.Contains(addr)).To(BeTrue(), "node %s's address %s is in the dynamic range %s", name, addr, dynamic)
	}

	// The next reconcile of the cluster starts the load balancer again,
	// on its address.
	_, err = b.ReconcileCluster(ctx, env.clusterSpec())
	g.Expect(err).NotTo(HaveOccurred())
	restarted := env.loadBalancer(g, ctx)
	g.Expect(restarted.State.Running).To(BeTrue())
	g.Expect(addressOn(restarted, env.network)).To(Equal(address))
}
