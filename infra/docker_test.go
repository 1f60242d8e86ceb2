package infra_test

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"github.com/moby/moby/client"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	kubeconfigutil "sigs.k8s.io/cluster-api/util/kubeconfig"

	"github.com/capi-monolith/capi-monolith/infra"
	infrav1 "github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/infra/internal/backend"
	"github.com/capi-monolith/capi-monolith/infra/internal/backend/docker"
	ipamv1alpha1 "github.com/capi-monolith/capi-monolith/ipam/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/test/envtest"
	"github.com/capi-monolith/capi-monolith/test/managertest"
)

// Images built by `make docker-test-images`: nothing can be pulled here.
const (
	testNodeImage = "capi-monolith/test-node:dev"
	testLBImage   = "capi-monolith/test-haproxy:dev"
	// sentinel is what real bootstrap data (kubeadm's) writes when done.
	bootstrapData = `#cloud-config
write_files:
- path: /etc/monolith/hello
  content: aGVsbG8K
  encoding: b64
  permissions: "0600"
runcmd:
- mkdir -p /run/cluster-api
- echo success > /run/cluster-api/bootstrap-success.complete
`
)

func dockerClient(t *testing.T) *client.Client {
	t.Helper()
	c, err := client.New(client.FromEnv, client.WithAPIVersionNegotiation())
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	_, err = c.Ping(context.Background(), client.PingOptions{})
	NewWithT(t).Expect(err).NotTo(HaveOccurred(), "these tests need a Docker Engine (set DOCKER_HOST)")
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func containersOf(g Gomega, c *client.Client, namespace, cluster string) []string {
	res, err := c.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: client.Filters{}.
		Add("label", infrav1.DockerLabelClusterNamespace+"="+namespace, infrav1.DockerLabelClusterName+"="+cluster)})
	g.Expect(err).NotTo(HaveOccurred())
	var names []string
	for _, s := range res.Items {
		names = append(names, s.Names...)
	}
	return names
}

// A docker cluster with a machine whose address comes from a pool inside
// the cluster's network: load balancer, node, bootstrap through exec, and
// nothing left behind on delete.
func TestDockerClusterAndMachineWithPoolAddress(t *testing.T) {
	g := NewWithT(t)
	dc := dockerClient(t)
	ns, err := env.CreateNamespace(ctx, "docker")
	g.Expect(err).NotTo(HaveOccurred())
	n := ns.Name
	network := "capim-" + n
	// The machine's failure domain names a network of its own.
	fdNetwork := network + "-fd-a"
	// Registered before the manager starts, so that it runs after the
	// manager stopped (cleanups run last-in, first-out): a running manager
	// would make the load balancer again.
	t.Cleanup(func() {
		// Whatever happened, leave no container or network on the host.
		b, err := docker.New(docker.Options{Client: dc})
		if err == nil {
			_ = b.DeleteCluster(context.Background(), backend.ClusterRef{Namespace: n, Name: "c"})
		}
	})
	infraOpts := infra.DefaultOptions()
	infraOpts.DockerUnprivilegedNodes = true
	managertest.Start(t, env.Config, managertest.Options(), infra.New(infraOpts), managertest.IPAM())

	cluster := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: n, Name: "c"},
		Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
			APIGroup: infrav1.GroupVersion.Group, Kind: "MonolithCluster", Name: "c"}},
	}
	g.Expect(env.Client.Create(ctx, cluster)).To(Succeed())
	mc := &infrav1.MonolithCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: n, Name: "c", Labels: map[string]string{clusterv1.ClusterNameLabel: "c"}},
		Spec: infrav1.MonolithClusterSpec{Backend: infrav1.ClusterBackend{Docker: &infrav1.DockerClusterBackend{
			Network: network, LoadBalancerImage: testLBImage}},
			FailureDomains: []clusterv1.FailureDomain{{Name: "fd-a", ControlPlane: ptr.To(true),
				Attributes: map[string]string{infrav1.FailureDomainNetworkAttribute: fdNetwork}}}},
	}
	mc.OwnerReferences = ownedBy(cluster, "Cluster")
	g.Expect(env.Client.Create(ctx, mc)).To(Succeed())

	g.Eventually(func(g Gomega) {
		get(g, mc)
		g.Expect(mc.Status.Initialization.Provisioned).To(Equal(ptr.To(true)))
		g.Expect(mc.Spec.ControlPlaneEndpoint.Port).To(Equal(int32(6443)))
		g.Expect(conditions.IsTrue(mc, infrav1.LoadBalancerAvailableCondition)).To(BeTrue())
	}, 2*timeout).Should(Succeed())
	net, err := dc.NetworkInspect(ctx, network, client.NetworkInspectOptions{})
	g.Expect(err).NotTo(HaveOccurred(), "the backend creates the missing network")
	g.Expect(net.Network.IPAM.Config).NotTo(BeEmpty())
	// No --docker-management-cluster: the identity is kube-system's UID.
	kubeSystem := &corev1.Namespace{}
	g.Expect(env.Client.Get(ctx, crclient.ObjectKey{Name: "kube-system"}, kubeSystem)).To(Succeed())
	identity := string(kubeSystem.UID)
	g.Expect(identity).NotTo(BeEmpty())
	g.Expect(net.Network.Labels).To(HaveKeyWithValue(docker.LabelManagementCluster, identity))
	subnet := net.Network.IPAM.Config[0].Subnet
	endpoint, err := netip.ParseAddr(mc.Spec.ControlPlaneEndpoint.Host)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(subnet.Contains(endpoint)).To(BeTrue(), "the endpoint is the load balancer on the network")

	statusPatch := crclient.MergeFrom(cluster.DeepCopy())
	cluster.Status.Initialization.InfrastructureProvisioned = ptr.To(true)
	g.Expect(env.Client.Status().Patch(ctx, cluster, statusPatch)).To(Succeed())

	// A pool of one address near the top of the network's subnet.
	static := subnet.Addr()
	for range 200 {
		static = static.Next()
	}
	pool := &ipamv1alpha1.MonolithIPPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: n, Name: "nodes"},
		Spec:       ipamv1alpha1.IPPoolSpec{Addresses: []string{static.String()}, Prefix: int32(subnet.Bits())},
	}
	g.Expect(env.Client.Create(ctx, pool)).To(Succeed())
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: n, Name: "boot"},
		Data: map[string][]byte{"value": []byte(bootstrapData), "format": []byte("cloud-config")}})).To(Succeed())
	machine := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: n, Name: "m", Labels: map[string]string{clusterv1.ClusterNameLabel: "c"}},
		Spec: clusterv1.MachineSpec{ClusterName: "c", Version: "v1.36.3", FailureDomain: "fd-a",
			Bootstrap:         clusterv1.Bootstrap{DataSecretName: ptr.To("boot")},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "MonolithMachine", Name: "m"}},
	}
	g.Expect(env.Client.Create(ctx, machine)).To(Succeed())
	group := ipamv1alpha1.GroupVersion.Group
	mm := &infrav1.MonolithMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: n, Name: "m", Labels: map[string]string{clusterv1.ClusterNameLabel: "c"}},
		Spec: infrav1.MonolithMachineSpec{
			Backend:            infrav1.MachineBackend{Docker: &infrav1.DockerMachineBackend{Image: testNodeImage}},
			AddressesFromPools: []corev1.TypedLocalObjectReference{{APIGroup: &group, Kind: ipamv1alpha1.MonolithIPPoolKind, Name: "nodes"}},
		},
	}
	mm.OwnerReferences = ownedBy(machine, "Machine")
	g.Expect(env.Client.Create(ctx, mm)).To(Succeed())

	g.Eventually(func(g Gomega) {
		get(g, mm)
		g.Expect(mm.Spec.ProviderID).To(HavePrefix("docker:////"))
		g.Expect(mm.Status.Addresses).To(ContainElement(clusterv1.MachineAddress{Type: clusterv1.MachineInternalIP, Address: static.String()}))
		g.Expect(conditions.IsTrue(mm, infrav1.BootstrapExecSucceededCondition)).To(BeTrue())
		g.Expect(conditions.IsTrue(mm, clusterv1.ReadyCondition)).To(BeTrue())
	}, 3*timeout).Should(Succeed())
	g.Expect(containersOf(g, dc, n, "c")).To(HaveLen(2), "one load balancer, one node")
	// Placed in the Machine's failure domain: labelled, on the domain's
	// network too, and reported.
	g.Expect(mm.Status.FailureDomain).To(Equal("fd-a"))
	nodeContainer, err := dc.ContainerInspect(ctx, strings.TrimPrefix(mm.Spec.ProviderID, "docker:////"), client.ContainerInspectOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(nodeContainer.Container.Config.Labels).To(HaveKeyWithValue(docker.LabelFailureDomain, "fd-a"))
	g.Expect(nodeContainer.Container.Config.Labels).To(HaveKeyWithValue(docker.LabelManagementCluster, identity))
	g.Expect(nodeContainer.Container.NetworkSettings.Networks).To(HaveKey(fdNetwork))
	g.Expect(nodeContainer.Container.NetworkSettings.Networks).To(HaveKey(network))

	// A node whose machine is gone (a manager killed at the wrong moment,
	// a finalizer removed by hand) is deleted by the next cluster
	// reconcile; the live machine's node stays, and so does the node of
	// another management cluster on the same Engine with the same names.
	leftover := func(identity, machine string) *docker.Backend {
		b, err := docker.New(docker.Options{Client: dc, UnprivilegedNodes: true, ManagementCluster: identity})
		g.Expect(err).NotTo(HaveOccurred())
		_, err = b.EnsureNode(ctx, backend.NodeSpec{
			Machine: backend.MachineRef{Cluster: backend.ClusterRef{Namespace: n, Name: "c"}, Name: machine},
			Cluster: mc.Spec.Backend, Backend: mm.Spec.Backend, Version: "v1.36.3",
		})
		g.Expect(err).NotTo(HaveOccurred())
		return b
	}
	leftover(identity, "gone")
	other := leftover("another-management-cluster", "other")
	g.Expect(containersOf(g, dc, n, "c")).To(HaveLen(4))
	touch := crclient.MergeFrom(mc.DeepCopy())
	mc.Annotations = map[string]string{"test.capi-monolith.dev/touch": "leftovers"}
	g.Expect(env.Client.Patch(ctx, mc, touch)).To(Succeed())
	g.Eventually(func(g Gomega) {
		names := containersOf(g, dc, n, "c")
		g.Expect(names).To(HaveLen(3))
		g.Expect(strings.Join(names, ",")).NotTo(ContainSubstring("gone"))
		g.Expect(strings.Join(names, ",")).To(ContainSubstring("other"))
	}, timeout).Should(Succeed())
	g.Expect(other.DeleteNode(ctx, backend.MachineRef{Cluster: backend.ClusterRef{Namespace: n, Name: "c"}, Name: "other"})).To(Succeed())
	g.Expect(containersOf(g, dc, n, "c")).To(HaveLen(2))

	// No workload cluster yet: the machine says so, and keeps looking.
	g.Eventually(func(g Gomega) {
		get(g, mm)
		c := conditions.Get(mm, infrav1.WorkloadNodeProviderIDSetCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(infrav1.WaitingForWorkloadClusterReason))
		g.Expect(c.Message).To(ContainSubstring("c-kubeconfig"))
	}, timeout).Should(Succeed())
	// The workload cluster comes up (envtest plays it) and its kubelet
	// registers a Node without a provider ID: the machine sets it.
	kubeconfig, err := envtest.KubeconfigFromREST(env.Config)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env.Client.Create(ctx, kubeconfigutil.GenerateSecret(cluster, kubeconfig))).To(Succeed())
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: hostnameOf(mm)}}
	g.Expect(env.Client.Create(ctx, node)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), node) })
	g.Eventually(func(g Gomega) {
		get(g, node)
		g.Expect(node.Spec.ProviderID).To(Equal(mm.Spec.ProviderID))
		get(g, mm)
		g.Expect(conditions.IsTrue(mm, infrav1.WorkloadNodeProviderIDSetCondition)).To(BeTrue())
	}, 3*timeout).Should(Succeed())

	g.Expect(env.Client.Delete(ctx, mm)).To(Succeed())
	g.Eventually(gone(mm), 2*timeout).Should(BeTrue())
	g.Eventually(gone(&ipamv1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: n, Name: "m-0"}}), timeout).Should(BeTrue())
	g.Expect(containersOf(g, dc, n, "c")).To(HaveLen(1), "the node container is gone")

	g.Expect(env.Client.Delete(ctx, mc)).To(Succeed())
	g.Eventually(gone(mc), 2*timeout).Should(BeTrue())
	g.Expect(containersOf(g, dc, n, "c")).To(BeEmpty())
	_, err = dc.NetworkInspect(ctx, network, client.NetworkInspectOptions{})
	g.Expect(err).To(HaveOccurred(), "the network the backend made is removed with the cluster")
	_, err = dc.NetworkInspect(ctx, fdNetwork, client.NetworkInspectOptions{})
	g.Expect(err).To(HaveOccurred(), "so is the failure domain's")
}

func hostnameOf(mm *infrav1.MonolithMachine) string {
	for _, a := range mm.Status.Addresses {
		if a.Type == clusterv1.MachineHostName {
			return a.Address
		}
	}
	return ""
}
