package infra_test

import (
	"crypto/tls"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/remote"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/kubeconfig"
	"sigs.k8s.io/cluster-api/util/secret"

	infrav1 "github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/test/kubeadmdata"
	"github.com/capi-monolith/capi-monolith/test/managertest"
)

// An inMemory cluster answers a workload Kubernetes API on its endpoint:
// TLS with the cluster CA once Cluster API wrote it, clients of the
// <cluster>-kubeconfig accepted, a bootstrapped machine's Node registered
// with the machine's provider ID, the Node gone with the machine, the
// workload state made again by a restarted manager on the same endpoint,
// and the listener closed when the cluster is deleted. What Cluster API
// core and the control plane provider would do (owner references,
// endpoint, CA and kubeconfig Secrets), the test does.
func TestInMemoryClusterServesItsWorkloadAPI(t *testing.T) {
	g := NewWithT(t)
	stop := start(t, managertest.Infra())
	ns, err := env.CreateNamespace(ctx, "workload")
	g.Expect(err).NotTo(HaveOccurred())
	n := ns.Name

	cluster := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: n, Name: "w"},
		Spec: clusterv1.ClusterSpec{
			ClusterNetwork: clusterv1.ClusterNetwork{Pods: clusterv1.NetworkRanges{CIDRBlocks: []string{"192.168.0.0/16"}}},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: infrav1.GroupVersion.Group, Kind: "MonolithCluster", Name: "w"},
		},
	}
	g.Expect(env.Client.Create(ctx, cluster)).To(Succeed())
	mc := &infrav1.MonolithCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: n, Name: "w", Labels: map[string]string{clusterv1.ClusterNameLabel: "w"}},
		Spec:       infrav1.MonolithClusterSpec{Backend: infrav1.ClusterBackend{InMemory: &infrav1.InMemoryClusterBackend{}}},
	}
	mc.OwnerReferences = ownedBy(cluster, "Cluster")
	g.Expect(env.Client.Create(ctx, mc)).To(Succeed())
	g.Eventually(func(g Gomega) {
		get(g, mc)
		g.Expect(mc.Status.Initialization.Provisioned).To(Equal(ptr.To(true)))
	}, timeout).Should(Succeed())
	endpoint := mc.Spec.ControlPlaneEndpoint
	g.Expect(endpoint.Host).To(Equal("127.0.0.1"))
	g.Expect(endpoint.Port).To(BeNumerically(">=", 20000))
	g.Expect(endpoint.Port).To(BeNumerically("<=", 23999))
	address := net.JoinHostPort(endpoint.Host, strconv.Itoa(int(endpoint.Port)))

	// Before Cluster API wrote the cluster CA, the listener is open but no
	// handshake succeeds.
	_, err = tls.Dial("tcp", address, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // only the handshake's failure matters
	g.Expect(err).To(HaveOccurred())

	// What core and the control plane provider do: the endpoint onto the
	// Cluster, the cluster certificates, the admin kubeconfig.
	patch := client.MergeFrom(cluster.DeepCopy())
	cluster.Spec.ControlPlaneEndpoint = endpoint
	g.Expect(env.Client.Patch(ctx, cluster, patch)).To(Succeed())
	statusPatch := client.MergeFrom(cluster.DeepCopy())
	cluster.Status.Initialization.InfrastructureProvisioned = ptr.To(true)
	g.Expect(env.Client.Status().Patch(ctx, cluster, statusPatch)).To(Succeed())
	certificates := secret.NewCertificatesForInitialControlPlane(nil)
	g.Expect(certificates.Generate()).To(Succeed())
	owner := metav1.OwnerReference{APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: cluster.Name, UID: cluster.UID}
	g.Expect(certificates.SaveGenerated(ctx, env.Client, client.ObjectKeyFromObject(cluster), owner)).To(Succeed())
	g.Expect(kubeconfig.CreateSecret(ctx, env.Client, cluster)).To(Succeed())

	workload := func(g Gomega) kubernetes.Interface {
		cfg, err := remote.RESTConfig(ctx, "test", env.Client, client.ObjectKeyFromObject(cluster))
		g.Expect(err).NotTo(HaveOccurred())
		cfg.Timeout = 10 * time.Second
		cs, err := kubernetes.NewForConfig(cfg)
		g.Expect(err).NotTo(HaveOccurred())
		return cs
	}
	g.Eventually(func(g Gomega) {
		v, err := workload(g).Discovery().ServerVersion()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(v.GitVersion).To(HavePrefix("v1."))
	}, timeout).Should(Succeed(), "the kubeconfig's client certificate is accepted")

	// A client certificate of another CA is refused at the handshake.
	other := secret.NewCertificatesForInitialControlPlane(nil)
	g.Expect(other.Generate()).To(Succeed())
	ca := other.GetByPurpose(secret.ClusterCA).KeyPair
	pair, err := tls.X509KeyPair(ca.Cert, ca.Key)
	g.Expect(err).NotTo(HaveOccurred())
	conn, err := tls.Dial("tcp", address, &tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{pair}}) //nolint:gosec // the server's refusal is what is tested
	if err == nil {
		// TLS 1.3: the server's verdict on the client certificate comes
		// with the first read.
		_, err = conn.Read(make([]byte, 1))
		_ = conn.Close()
	}
	g.Expect(err).To(HaveOccurred())

	// A machine that ran its bootstrap data registers as a Node of the
	// workload cluster, with the machine's provider ID.
	mm := createWorkloadMachine(g, n, cluster, "w-md-1", false)
	g.Eventually(func(g Gomega) {
		get(g, mm)
		g.Expect(conditions.IsTrue(mm, infrav1.WorkloadNodeProviderIDSetCondition)).To(BeTrue(), "%v", conditions.Get(mm, infrav1.WorkloadNodeProviderIDSetCondition))
	}, timeout).Should(Succeed())
	node := &corev1.Node{}
	g.Eventually(func(g Gomega) {
		node, err = workload(g).CoreV1().Nodes().Get(ctx, "w-md-1", metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
	}, timeout).Should(Succeed())
	g.Expect(node.Spec.ProviderID).To(Equal(mm.Spec.ProviderID))
	g.Expect(node.Status.NodeInfo.KubeletVersion).To(Equal("v1.36.3"))
	g.Expect(node.Status.Addresses).To(ContainElement(corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: internalIP(mm)}))
	g.Expect(node.Status.Conditions).To(ContainElement(And(HaveField("Type", corev1.NodeReady), HaveField("Status", corev1.ConditionTrue))))

	// Its OpenAPI is the management cluster's, filtered to what it serves.
	openAPI, err := workload(g).Discovery().OpenAPIV3().Paths()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(openAPI).To(HaveKey("apis/apps/v1"))
	g.Expect(openAPI).NotTo(HaveKey("apis/cluster.x-k8s.io/v1beta2"))
	nodeSchema, err := openAPI["api/v1"].Schema("application/json")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(nodeSchema)).To(ContainSubstring(`"io.k8s.api.core.v1.NodeSpec"`))

	// A restarted manager serves the cluster on the same endpoint and
	// registers the node again; a change made through the workload API
	// is gone with the old process's memory, as it would be with a lost
	// etcd, but the Node is back.
	stop()
	_, err = net.DialTimeout("tcp", address, time.Second)
	g.Expect(err).To(HaveOccurred(), "the stopped manager closed the listener")
	start(t, managertest.Infra())
	g.Eventually(func(g Gomega) {
		got, err := workload(g).CoreV1().Nodes().Get(ctx, "w-md-1", metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got.Spec.ProviderID).To(Equal(mm.Spec.ProviderID))
	}, timeout).Should(Succeed(), "the restarted manager registers the bootstrapped machine's node again")
	get(g, mc)
	g.Expect(mc.Spec.ControlPlaneEndpoint).To(Equal(endpoint))

	// The machine's deletion takes its Node out of the workload cluster.
	g.Expect(env.Client.Delete(ctx, mm)).To(Succeed())
	g.Eventually(gone(mm), timeout).Should(BeTrue())
	g.Eventually(func(g Gomega) {
		_, err := workload(g).CoreV1().Nodes().Get(ctx, "w-md-1", metav1.GetOptions{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "Node still there: %v", err)
	}, timeout).Should(Succeed())

	// The cluster's deletion closes its listener.
	g.Expect(env.Client.Delete(ctx, mc)).To(Succeed())
	g.Eventually(gone(mc), timeout).Should(BeTrue())
	g.Eventually(func() error {
		c, err := net.DialTimeout("tcp", address, time.Second)
		if err == nil {
			_ = c.Close()
			return fmt.Errorf("%s still accepts connections", address)
		}
		return nil
	}, timeout).Should(Succeed())
}

// createWorkloadMachine makes a Machine with bootstrap data and its
// MonolithMachine, as core would.
func createWorkloadMachine(g Gomega, namespace string, cluster *clusterv1.Cluster, name string, controlPlane bool) *infrav1.MonolithMachine {
	labels := map[string]string{clusterv1.ClusterNameLabel: cluster.Name}
	if controlPlane {
		labels[clusterv1.MachineControlPlaneLabel] = ""
	}
	data := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name + "-bootstrap"},
		Data:       map[string][]byte{"value": []byte(kubeadmdata.JoinWorker)},
	}
	g.Expect(env.Client.Create(ctx, data)).To(Succeed())
	machine := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels},
		Spec: clusterv1.MachineSpec{
			ClusterName: cluster.Name, Version: "v1.36.3",
			Bootstrap:         clusterv1.Bootstrap{DataSecretName: ptr.To(data.Name)},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "MonolithMachine", Name: name},
		},
	}
	g.Expect(env.Client.Create(ctx, machine)).To(Succeed())
	mm := &infrav1.MonolithMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels},
		Spec:       infrav1.MonolithMachineSpec{Backend: infrav1.MachineBackend{InMemory: &infrav1.InMemoryMachineBackend{}}},
	}
	mm.OwnerReferences = ownedBy(machine, "Machine")
	g.Expect(env.Client.Create(ctx, mm)).To(Succeed())
	return mm
}

func internalIP(mm *infrav1.MonolithMachine) string {
	for _, a := range mm.Status.Addresses {
		if a.Type == clusterv1.MachineInternalIP {
			return a.Address
		}
	}
	return ""
}

// A MonolithCluster whose recorded endpoint another process still listens
// on (after clusterctl move, the source management cluster's manager until
// it lets go) says so in its LoadBalancerAvailable condition, and is
// served on that endpoint soon after it is let go: the wait is a short
// recheck, not an error's growing backoff.
func TestInMemoryClusterWaitsForItsRecordedEndpointToBeLetGo(t *testing.T) {
	g := NewWithT(t)
	start(t, managertest.Infra())
	ns, err := env.CreateNamespace(ctx, "moved-endpoint")
	g.Expect(err).NotTo(HaveOccurred())
	n := ns.Name

	// The other process: a listener on a port of the default range.
	var held net.Listener
	for port := 23999; port >= 20000 && held == nil; port-- {
		held, _ = net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	}
	g.Expect(held).NotTo(BeNil(), "a free port in the workload range")
	defer held.Close()
	endpoint := clusterv1.APIEndpoint{Host: "127.0.0.1", Port: int32(held.Addr().(*net.TCPAddr).Port)}

	cluster := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: n, Name: "moved"},
		Spec: clusterv1.ClusterSpec{
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: infrav1.GroupVersion.Group, Kind: "MonolithCluster", Name: "moved"},
		},
	}
	g.Expect(env.Client.Create(ctx, cluster)).To(Succeed())
	mc := &infrav1.MonolithCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: n, Name: "moved", Labels: map[string]string{clusterv1.ClusterNameLabel: "moved"}},
		Spec: infrav1.MonolithClusterSpec{
			ControlPlaneEndpoint: endpoint,
			Backend:              infrav1.ClusterBackend{InMemory: &infrav1.InMemoryClusterBackend{}},
		},
	}
	mc.OwnerReferences = ownedBy(cluster, "Cluster")
	g.Expect(env.Client.Create(ctx, mc)).To(Succeed())
	g.Eventually(func(g Gomega) {
		get(g, mc)
		c := conditions.Get(mc, infrav1.LoadBalancerAvailableCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(infrav1.WaitingForEndpointReason))
		g.Expect(c.Message).To(ContainSubstring("another process listens on the endpoint"))
	}, timeout).Should(Succeed())
	g.Expect(mc.Status.Initialization.Provisioned).To(BeNil())

	g.Expect(held.Close()).To(Succeed())
	g.Eventually(func(g Gomega) {
		get(g, mc)
		g.Expect(mc.Status.Initialization.Provisioned).To(Equal(ptr.To(true)))
	}, timeout).Should(Succeed())
	g.Expect(mc.Spec.ControlPlaneEndpoint).To(Equal(endpoint), "served on the recorded endpoint")
	c, err := net.DialTimeout("tcp", net.JoinHostPort(endpoint.Host, strconv.Itoa(int(endpoint.Port))), time.Second)
	g.Expect(err).NotTo(HaveOccurred(), "the manager listens on the endpoint")
	_ = c.Close()

	g.Expect(env.Client.Delete(ctx, mc)).To(Succeed())
	g.Eventually(gone(mc), timeout).Should(BeTrue())
}

// A paused cluster keeps its workload API endpoint across a manager
// restart: the restarted manager does not reconcile it, yet listens on its
// recorded endpoint again, so no other process can take the port before
// it is unpaused; nothing is written to its MonolithCluster meanwhile.
func TestPausedInMemoryClusterKeepsItsEndpointAcrossARestart(t *testing.T) {
	g := NewWithT(t)
	stop := start(t, managertest.Infra())
	ns, err := env.CreateNamespace(ctx, "paused-endpoint")
	g.Expect(err).NotTo(HaveOccurred())
	n := ns.Name

	cluster := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: n, Name: "p"},
		Spec: clusterv1.ClusterSpec{
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: infrav1.GroupVersion.Group, Kind: "MonolithCluster", Name: "p-infra"},
		},
	}
	g.Expect(env.Client.Create(ctx, cluster)).To(Succeed())
	mc := &infrav1.MonolithCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: n, Name: "p-infra", Labels: map[string]string{clusterv1.ClusterNameLabel: "p"}},
		Spec:       infrav1.MonolithClusterSpec{Backend: infrav1.ClusterBackend{InMemory: &infrav1.InMemoryClusterBackend{}}},
	}
	mc.OwnerReferences = ownedBy(cluster, "Cluster")
	g.Expect(env.Client.Create(ctx, mc)).To(Succeed())
	g.Eventually(func(g Gomega) {
		get(g, mc)
		g.Expect(mc.Status.Initialization.Provisioned).To(Equal(ptr.To(true)))
	}, timeout).Should(Succeed())
	address := net.JoinHostPort(mc.Spec.ControlPlaneEndpoint.Host, strconv.Itoa(int(mc.Spec.ControlPlaneEndpoint.Port)))

	patch := client.MergeFrom(cluster.DeepCopy())
	cluster.Spec.Paused = ptr.To(true)
	g.Expect(env.Client.Patch(ctx, cluster, patch)).To(Succeed())
	g.Eventually(func(g Gomega) {
		get(g, mc)
		g.Expect(conditions.IsTrue(mc, clusterv1.PausedCondition)).To(BeTrue())
	}, timeout).Should(Succeed())
	version := mc.ResourceVersion

	stop()
	_, err = net.DialTimeout("tcp", address, time.Second)
	g.Expect(err).To(HaveOccurred(), "the stopped manager closed the listener")
	start(t, managertest.Infra())
	g.Eventually(func() error {
		c, err := net.DialTimeout("tcp", address, time.Second)
		if err == nil {
			_ = c.Close()
		}
		return err
	}, timeout).Should(Succeed(), "the restarted manager listens on the paused cluster's endpoint")
	get(g, mc)
	g.Expect(mc.ResourceVersion).To(Equal(version), "the paused MonolithCluster is not written to")

	patch = client.MergeFrom(cluster.DeepCopy())
	cluster.Spec.Paused = nil
	g.Expect(env.Client.Patch(ctx, cluster, patch)).To(Succeed())
	g.Expect(env.Client.Delete(ctx, mc)).To(Succeed())
	g.Eventually(gone(mc), timeout).Should(BeTrue())
}
