package kubeadm

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/blang/semver/v4"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	kubeadmtypes "sigs.k8s.io/cluster-api/bootstrap/kubeadm/pkg/types"
)

var staticComponents = []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "etcd"}

func TestEnsureInitMakesWhatKubeadmInitAndTheKubeletMake(t *testing.T) {
	g := NewWithT(t)
	tc := newTestCluster(t)
	ctx := context.Background()
	c := testClusterSpec(t)
	mustEnsure(t, tc, c, controlPlaneNode("cp-0", "10.0.0.10"))

	// The Node, as core's Machine controller finds it (by spec.providerID)
	// and KubeadmControlPlane lists control-plane Nodes (by the role label).
	cpNodes := &corev1.NodeList{}
	g.Expect(tc.client.List(ctx, cpNodes, client.MatchingLabels{LabelControlPlane: ""})).To(Succeed())
	g.Expect(cpNodes.Items).To(HaveLen(1))
	node := cpNodes.Items[0]
	g.Expect(node.Name).To(Equal("cp-0"))
	g.Expect(node.Spec.ProviderID).To(Equal("inmemory://cp-0"))
	g.Expect(node.Labels).To(HaveKeyWithValue(LabelExcludeFromExternalLB, ""))
	g.Expect(node.Labels).To(HaveKeyWithValue(corev1.LabelHostname, "cp-0"))
	g.Expect(node.Labels).To(HaveKeyWithValue(corev1.LabelTopologyZone, "fd-1"))
	g.Expect(node.Spec.Taints).To(ConsistOf(corev1.Taint{Key: LabelControlPlane, Effect: corev1.TaintEffectNoSchedule}))
	g.Expect(node.Status.NodeInfo.KubeletVersion).To(Equal("v1.36.3"))
	g.Expect(node.Status.Addresses).To(ContainElements(
		corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.0.0.10"},
		corev1.NodeAddress{Type: corev1.NodeHostName, Address: "cp-0"}))
	g.Expect(conditionOf(node, corev1.NodeReady)).To(Equal(corev1.ConditionTrue))
	for _, pressure := range []corev1.NodeConditionType{corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure} {
		g.Expect(conditionOf(node, pressure)).To(Equal(corev1.ConditionFalse), string(pressure))
	}
	lease := &coordinationv1.Lease{}
	g.Expect(tc.client.Get(ctx, client.ObjectKey{Namespace: "kube-node-lease", Name: "cp-0"}, lease)).To(Succeed())
	g.Expect(lease.OwnerReferences).To(ConsistOf(HaveField("UID", node.UID)))

	// The static Pods, as KubeadmControlPlane reads them: by name, phase
	// and Ready condition; mirror Pods (drain skips them) owned by the Node.
	for _, component := range staticComponents {
		pod := &corev1.Pod{}
		g.Expect(tc.client.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: component + "-cp-0"}, pod)).To(Succeed(), component)
		g.Expect(pod.Labels).To(Equal(map[string]string{"component": component, "tier": "control-plane"}))
		g.Expect(pod.Spec.NodeName).To(Equal("cp-0"))
		g.Expect(pod.Status.Phase).To(Equal(corev1.PodRunning))
		g.Expect(podConditionOf(pod, corev1.PodReady)).To(Equal(corev1.ConditionTrue))
		g.Expect(pod.Status.PodIP).To(Equal("10.0.0.10"))
		g.Expect(pod.Annotations).To(HaveKey(corev1.MirrorPodAnnotationKey))
		g.Expect(metav1.GetControllerOf(pod)).To(HaveField("Kind", "Node"))
		g.Expect(pod.Spec.Containers).To(HaveLen(1))
		g.Expect(pod.Spec.Containers[0].Image).To(HavePrefix("registry.k8s.io/" + component + ":"))
	}
	// The etcd helper's view: Pods labelled component=etcd, one per node.
	etcdPods := &corev1.PodList{}
	g.Expect(tc.client.List(ctx, etcdPods, client.InNamespace("kube-system"), client.MatchingLabels{"component": "etcd"})).To(Succeed())
	g.Expect(etcdPods.Items).To(ConsistOf(And(HaveField("Name", "etcd-cp-0"), HaveField("Spec.NodeName", "cp-0"), HaveField("Status.PodIP", "10.0.0.10"))))

	// kubeadm-config: its presence is KubeadmControlPlane's "initialized";
	// it reads and rewrites the ClusterConfiguration with kubeadm's types.
	kubeadmConfig := &corev1.ConfigMap{}
	g.Expect(tc.client.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "kubeadm-config"}, kubeadmConfig)).To(Succeed())
	g.Expect(kubeadmConfig.Data[clusterConfigurationKey]).To(ContainSubstring("apiVersion: kubeadm.k8s.io/v1beta4"))
	cc, extra, err := kubeadmtypes.UnmarshalClusterConfiguration(kubeadmConfig.Data[clusterConfigurationKey])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cc.ControlPlaneEndpoint).To(Equal("c1.workload.local:6443"))
	g.Expect(cc.Etcd.Local.DataDir).To(Equal("/var/lib/etcd"))
	g.Expect(cc.ImageRepository).To(Equal("registry.k8s.io"))
	g.Expect(cc.CertificatesDir).To(Equal("/etc/kubernetes/pki"))
	g.Expect(extra.KubernetesVersion).To(Equal(ptr.To("v1.36.3")))
	g.Expect(extra.ClusterName).To(Equal(ptr.To("c1")))
	g.Expect(extra.PodSubnet).To(Equal(ptr.To("192.168.0.0/16")))
	g.Expect(extra.ServiceSubnet).To(Equal(ptr.To("10.128.0.0/12")))
	g.Expect(extra.DNSDomain).To(Equal(ptr.To("cluster.local")))

	kubeletConfig := &corev1.ConfigMap{}
	g.Expect(tc.client.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "kubelet-config"}, kubeletConfig)).To(Succeed())
	g.Expect(kubeletConfig.Data["kubelet"]).To(And(ContainSubstring("kind: KubeletConfiguration"), ContainSubstring("- 10.128.0.10\n")))

	// CoreDNS and kube-proxy, as KubeadmControlPlane upgrades them.
	coredns := &appsv1.Deployment{}
	g.Expect(tc.client.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "coredns"}, coredns)).To(Succeed())
	g.Expect(coredns.Spec.Template.Spec.Containers).To(ConsistOf(HaveField("Name", "coredns")))
	image := coredns.Spec.Template.Spec.Containers[0].Image
	g.Expect(image).To(HavePrefix("registry.k8s.io/coredns/coredns:v"))
	_, err = semver.ParseTolerant(image[strings.LastIndex(image, ":")+1:])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(coredns.Spec.Template.Spec.Volumes).To(ConsistOf(And(HaveField("Name", "config-volume"),
		HaveField("ConfigMap.Name", "coredns"), HaveField("ConfigMap.Items", ConsistOf(corev1.KeyToPath{Key: "Corefile", Path: "Corefile"})))))
	g.Expect(coredns.Status.AvailableReplicas).To(Equal(int32(2)))
	corefile := &corev1.ConfigMap{}
	g.Expect(tc.client.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "coredns"}, corefile)).To(Succeed())
	g.Expect(corefile.Data["Corefile"]).To(ContainSubstring("kubernetes cluster.local in-addr.arpa ip6.arpa"))

	kubeProxy := &appsv1.DaemonSet{}
	g.Expect(tc.client.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "kube-proxy"}, kubeProxy)).To(Succeed())
	g.Expect(kubeProxy.Spec.Template.Spec.Containers).To(ConsistOf(And(HaveField("Name", "kube-proxy"), HaveField("Image", "registry.k8s.io/kube-proxy:v1.36.3"))))
	g.Expect(kubeProxy.Status.DesiredNumberScheduled).To(Equal(int32(1)))
	g.Expect(kubeProxy.Status.NumberReady).To(Equal(int32(1)))
	proxies := kubeProxyPods(t, tc, "cp-0")
	g.Expect(proxies).To(HaveLen(1))
	g.Expect(metav1.GetControllerOf(&proxies[0])).To(And(HaveField("Kind", "DaemonSet"), HaveField("UID", kubeProxy.UID)))
	g.Expect(proxies[0].Status.Phase).To(Equal(corev1.PodRunning))

	// cluster-info: the API server and CA, as kubeadm join reads them.
	clusterInfo := &corev1.ConfigMap{}
	g.Expect(tc.client.Get(ctx, client.ObjectKey{Namespace: "kube-public", Name: "cluster-info"}, clusterInfo)).To(Succeed())
	kubeconfig, err := clientcmd.Load([]byte(clusterInfo.Data["kubeconfig"]))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(kubeconfig.Clusters).To(HaveKey(""))
	g.Expect(kubeconfig.Clusters[""].Server).To(Equal("https://c1.workload.local:6443"))
	g.Expect(kubeconfig.Clusters[""].CertificateAuthorityData).To(Equal(c.CACertPEM))

	// RBAC kubeadm makes (KubeadmControlPlane makes kubeadm:cluster-admins on
	// upgrades when it is missing: it is there).
	crb := &rbacv1.ClusterRoleBinding{}
	g.Expect(tc.client.Get(ctx, client.ObjectKey{Name: "kubeadm:cluster-admins"}, crb)).To(Succeed())
	g.Expect(crb.RoleRef.Name).To(Equal("cluster-admin"))
	rb := &rbacv1.RoleBinding{}
	g.Expect(tc.client.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "kubeadm:nodes-kubeadm-config"}, rb)).To(Succeed())
	g.Expect(tc.client.Get(ctx, client.ObjectKey{Namespace: "kube-public", Name: "kubeadm:bootstrap-signer-clusterinfo"}, rb)).To(Succeed())
	g.Expect(tc.client.Get(ctx, client.ObjectKey{Name: "kubeadm:apiserver-kubelet-client"}, crb)).NotTo(Succeed(), "kubeadm makes it from v1.37")
}

func TestEnsureJoinsControlPlanesAndWorkers(t *testing.T) {
	g := NewWithT(t)
	tc := newTestCluster(t)
	ctx := context.Background()
	c := testClusterSpec(t)

	// A worker before any control plane (a store rebuilt in any order):
	// its Node, and its kube-proxy Pod once the DaemonSet exists.
	worker := workerNode("w-0", "10.0.1.10")
	worker.Taints = &[]corev1.Taint{clusterv1.NodeUninitializedTaint}
	worker.Labels = map[string]string{"tier": "worker"}
	mustEnsure(t, tc, c, worker)
	g.Expect(kubeProxyPods(t, tc, "w-0")).To(BeEmpty())

	mustEnsure(t, tc, c, controlPlaneNode("cp-0", "10.0.0.10"))
	mustEnsure(t, tc, c, controlPlaneNode("cp-1", "10.0.0.11"))
	mustEnsure(t, tc, c, worker)

	etcdPods := &corev1.PodList{}
	g.Expect(tc.client.List(ctx, etcdPods, client.InNamespace("kube-system"), client.MatchingLabels{"component": "etcd"})).To(Succeed())
	g.Expect(etcdPods.Items).To(ConsistOf(
		And(HaveField("Name", "etcd-cp-0"), HaveField("Spec.NodeName", "cp-0"), HaveField("Status.PodIP", "10.0.0.10")),
		And(HaveField("Name", "etcd-cp-1"), HaveField("Spec.NodeName", "cp-1"), HaveField("Status.PodIP", "10.0.0.11"))))
	for _, component := range staticComponents {
		g.Expect(tc.client.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: component + "-cp-1"}, &corev1.Pod{})).To(Succeed(), component)
	}

	w := &corev1.Node{}
	g.Expect(tc.client.Get(ctx, client.ObjectKey{Name: "w-0"}, w)).To(Succeed())
	g.Expect(w.Labels).NotTo(HaveKey(LabelControlPlane))
	g.Expect(w.Labels).To(HaveKeyWithValue("tier", "worker"))
	g.Expect(w.Spec.Taints).To(ConsistOf(clusterv1.NodeUninitializedTaint))
	g.Expect(conditionOf(*w, corev1.NodeReady)).To(Equal(corev1.ConditionTrue))
	workerPods := &corev1.PodList{}
	g.Expect(tc.client.List(ctx, workerPods, client.MatchingFields{"spec.nodeName": "w-0"})).To(Succeed())
	g.Expect(workerPods.Items).To(ConsistOf(HaveField("Labels", HaveKeyWithValue("k8s-app", "kube-proxy"))), "a worker runs no static Pods")

	ds := &appsv1.DaemonSet{}
	g.Expect(tc.client.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "kube-proxy"}, ds)).To(Succeed())
	g.Expect(ds.Status.DesiredNumberScheduled).To(Equal(int32(3)))

	// A control plane whose taints kubeadm was told to leave out.
	bare := controlPlaneNode("cp-2", "10.0.0.12")
	bare.Taints = &[]corev1.Taint{}
	mustEnsure(t, tc, c, bare)
	n := &corev1.Node{}
	g.Expect(tc.client.Get(ctx, client.ObjectKey{Name: "cp-2"}, n)).To(Succeed())
	g.Expect(n.Spec.Taints).To(BeEmpty())
	g.Expect(n.Labels).To(HaveKey(LabelControlPlane))
}

func TestEnsureLeavesWhatExists(t *testing.T) {
	g := NewWithT(t)
	tc := newTestCluster(t)
	ctx := context.Background()
	c := testClusterSpec(t)
	mustEnsure(t, tc, c, controlPlaneNode("cp-0", "10.0.0.10"))
	mustEnsure(t, tc, c, workerNode("w-0", "10.0.1.10"))

	// A person sets the worker's Ready condition False (as a
	// MachineHealthCheck exercise does) with a status patch, and labels it.
	_, err := tc.cs.CoreV1().Nodes().Patch(ctx, "w-0", types.StrategicMergePatchType,
		[]byte(`{"status":{"conditions":[{"type":"Ready","status":"False","reason":"Test"}]}}`), metav1.PatchOptions{}, "status")
	g.Expect(err).NotTo(HaveOccurred())
	_, err = tc.cs.CoreV1().Nodes().Patch(ctx, "w-0", types.MergePatchType, []byte(`{"metadata":{"labels":{"by":"kubectl"}}}`), metav1.PatchOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	// Core syncs the Machine's labels with server-side apply and drops the
	// uninitialized taint.
	g.Expect(tc.client.Apply(ctx, corev1ac.Node("w-0").WithLabels(map[string]string{"node-role.kubernetes.io/worker": ""}),
		client.FieldOwner("capi-nodelabels"), client.ForceOwnership)).To(Succeed())
	// KubeadmControlPlane rewrites kubeadm-config on an upgrade, as its
	// UpdateClusterConfiguration does.
	updateKubeadmConfig(t, tc, "v1.37.0", func(cc *bootstrapv1.ClusterConfiguration) { cc.ImageRepository = "example.registry" })
	// A static Pod deleted comes back (the kubelet recreates mirror Pods);
	// an addon deleted stays deleted (kubeadm init ran once).
	g.Expect(tc.client.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kube-scheduler-cp-0"}})).To(Succeed())
	g.Expect(tc.client.Delete(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "coredns"}})).To(Succeed())

	mustEnsure(t, tc, c, controlPlaneNode("cp-0", "10.0.0.10"))
	rv := tc.store.ResourceVersion()
	mustEnsure(t, tc, c, workerNode("w-0", "10.0.1.10"))
	mustEnsure(t, tc, c, controlPlaneNode("cp-0", "10.0.0.10"))
	g.Expect(tc.store.ResourceVersion()).To(Equal(rv), "Ensuring what exists writes nothing")

	w := &corev1.Node{}
	g.Expect(tc.client.Get(ctx, client.ObjectKey{Name: "w-0"}, w)).To(Succeed())
	g.Expect(conditionOf(*w, corev1.NodeReady)).To(Equal(corev1.ConditionFalse))
	g.Expect(w.Labels).To(And(HaveKeyWithValue("by", "kubectl"), HaveKeyWithValue("node-role.kubernetes.io/worker", "")))
	g.Expect(tc.client.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "kube-scheduler-cp-0"}, &corev1.Pod{})).To(Succeed())
	g.Expect(apierrors.IsNotFound(tc.client.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "coredns"}, &appsv1.Deployment{}))).To(BeTrue())

	cm := &corev1.ConfigMap{}
	g.Expect(tc.client.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "kubeadm-config"}, cm)).To(Succeed())
	cc, extra, err := kubeadmtypes.UnmarshalClusterConfiguration(cm.Data[clusterConfigurationKey])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(extra.KubernetesVersion).To(Equal(ptr.To("v1.37.0")))
	g.Expect(cc.ImageRepository).To(Equal("example.registry"))

	// A control plane joining after the upgrade runs the images kubeadm-config names.
	mustEnsure(t, tc, c, controlPlaneNode("cp-1", "10.0.0.11"))
	pod := &corev1.Pod{}
	g.Expect(tc.client.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "kube-apiserver-cp-1"}, pod)).To(Succeed())
	g.Expect(pod.Spec.Containers[0].Image).To(Equal("example.registry/kube-apiserver:v1.36.3"))
}

// The inMemory backend reconciles machines concurrently: Ensures of one
// cluster's nodes race for its cluster-wide objects and the DaemonSet status.
func TestConcurrentEnsuresOfOneCluster(t *testing.T) {
	g := NewWithT(t)
	tc := newTestCluster(t)
	ctx := context.Background()
	c := testClusterSpec(t)
	nodes := []Node{controlPlaneNode("cp-0", "10.0.0.10"), controlPlaneNode("cp-1", "10.0.0.11"), controlPlaneNode("cp-2", "10.0.0.12")}
	for i := range 5 {
		nodes = append(nodes, workerNode(fmt.Sprintf("w-%d", i), fmt.Sprintf("10.0.1.%d", 10+i)))
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2*len(nodes))
	for range 2 {
		for _, n := range nodes {
			wg.Go(func() { errs <- Ensure(ctx, tc.store, c, n) })
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		g.Expect(err).NotTo(HaveOccurred())
	}
	// Workers Ensured before the DaemonSet existed get their kube-proxy Pod now.
	for _, n := range nodes {
		mustEnsure(t, tc, c, n)
	}
	list := &corev1.NodeList{}
	g.Expect(tc.client.List(ctx, list)).To(Succeed())
	g.Expect(list.Items).To(HaveLen(len(nodes)))
	ds := &appsv1.DaemonSet{}
	g.Expect(tc.client.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "kube-proxy"}, ds)).To(Succeed())
	g.Expect(ds.Status.DesiredNumberScheduled).To(Equal(int32(len(nodes))))
	etcdPods := &corev1.PodList{}
	g.Expect(tc.client.List(ctx, etcdPods, client.InNamespace("kube-system"), client.MatchingLabels{"component": "etcd"})).To(Succeed())
	g.Expect(etcdPods.Items).To(HaveLen(3))
}

func TestRemoveDeletesTheNodeAndItsPods(t *testing.T) {
	g := NewWithT(t)
	tc := newTestCluster(t)
	ctx := context.Background()
	c := testClusterSpec(t)
	mustEnsure(t, tc, c, controlPlaneNode("cp-0", "10.0.0.10"))
	mustEnsure(t, tc, c, controlPlaneNode("cp-1", "10.0.0.11"))
	mustEnsure(t, tc, c, workerNode("w-0", "10.0.1.10"))
	// A workload Pod bound to the worker.
	g.Expect(tc.client.Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "app"},
		Spec:       corev1.PodSpec{NodeName: "w-0", Containers: []corev1.Container{{Name: "app", Image: "app"}}},
	})).To(Succeed())

	g.Expect(Remove(ctx, tc.store, "w-0")).To(Succeed())
	g.Expect(apierrors.IsNotFound(tc.client.Get(ctx, client.ObjectKey{Name: "w-0"}, &corev1.Node{}))).To(BeTrue())
	g.Expect(apierrors.IsNotFound(tc.client.Get(ctx, client.ObjectKey{Namespace: "kube-node-lease", Name: "w-0"}, &coordinationv1.Lease{}))).To(BeTrue())
	bound := &corev1.PodList{}
	g.Expect(tc.client.List(ctx, bound, client.MatchingFields{"spec.nodeName": "w-0"})).To(Succeed())
	g.Expect(bound.Items).To(BeEmpty())

	g.Expect(Remove(ctx, tc.store, "cp-1")).To(Succeed())
	etcdPods := &corev1.PodList{}
	g.Expect(tc.client.List(ctx, etcdPods, client.InNamespace("kube-system"), client.MatchingLabels{"component": "etcd"})).To(Succeed())
	g.Expect(etcdPods.Items).To(ConsistOf(HaveField("Name", "etcd-cp-0")))
	for _, component := range staticComponents {
		g.Expect(apierrors.IsNotFound(tc.client.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: component + "-cp-1"}, &corev1.Pod{}))).To(BeTrue(), component)
	}
	ds := &appsv1.DaemonSet{}
	g.Expect(tc.client.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "kube-proxy"}, ds)).To(Succeed())
	g.Expect(ds.Status.DesiredNumberScheduled).To(Equal(int32(1)))

	// The cluster stays initialized; removing again is no error.
	g.Expect(tc.client.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "kubeadm-config"}, &corev1.ConfigMap{})).To(Succeed())
	g.Expect(Remove(ctx, tc.store, "cp-1")).To(Succeed())
	g.Expect(tc.client.Get(ctx, client.ObjectKey{Name: "cp-0"}, &corev1.Node{})).To(Succeed())
}

func TestExternalEtcdMeansNoEtcdPods(t *testing.T) {
	g := NewWithT(t)
	tc := newTestCluster(t)
	ctx := context.Background()
	c := testClusterSpec(t)
	c.ClusterConfiguration = &bootstrapv1.ClusterConfiguration{
		Etcd: bootstrapv1.Etcd{External: bootstrapv1.ExternalEtcd{Endpoints: []string{"https://etcd.example:2379"}}},
	}
	mustEnsure(t, tc, c, controlPlaneNode("cp-0", "10.0.0.10"))
	mustEnsure(t, tc, c, controlPlaneNode("cp-1", "10.0.0.11"))

	pods := &corev1.PodList{}
	g.Expect(tc.client.List(ctx, pods, client.InNamespace("kube-system"), client.MatchingLabels{"tier": "control-plane"})).To(Succeed())
	g.Expect(pods.Items).To(HaveLen(6))
	g.Expect(pods.Items).NotTo(ContainElement(HaveField("Labels", HaveKeyWithValue("component", "etcd"))))
	cm := &corev1.ConfigMap{}
	g.Expect(tc.client.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "kubeadm-config"}, cm)).To(Succeed())
	cc, _, err := kubeadmtypes.UnmarshalClusterConfiguration(cm.Data[clusterConfigurationKey])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cc.Etcd.External.Endpoints).To(Equal([]string{"https://etcd.example:2379"}))
	g.Expect(cc.Etcd.Local.DataDir).To(BeEmpty())
}

func TestEnsureRefusesWhatKubeadmWouldRefuse(t *testing.T) {
	g := NewWithT(t)
	tc := newTestCluster(t)
	c := testClusterSpec(t)
	n := controlPlaneNode("cp-0", "10.0.0.10")
	n.KubeletVersion = "latest"
	g.Expect(Ensure(context.Background(), tc.store, c, n)).To(MatchError(ContainSubstring(`"latest"`)))
	g.Expect(Ensure(context.Background(), tc.store, c, Node{KubeletVersion: "v1.36.3"})).To(MatchError(ContainSubstring("no node name")))
	c.KubernetesVersion = ""
	g.Expect(Ensure(context.Background(), tc.store, c, controlPlaneNode("cp-0", "10.0.0.10"))).To(MatchError(ContainSubstring("no Kubernetes version")))
}

// updateKubeadmConfig rewrites kubeadm-config as KubeadmControlPlane's
// UpdateClusterConfiguration does: decode, mutate, encode for the version, update.
func updateKubeadmConfig(t *testing.T, tc *testCluster, version string, mutate func(*bootstrapv1.ClusterConfiguration)) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	cm := &corev1.ConfigMap{}
	g.Expect(tc.client.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "kubeadm-config"}, cm)).To(Succeed())
	cc, extra, err := kubeadmtypes.UnmarshalClusterConfiguration(cm.Data[clusterConfigurationKey])
	g.Expect(err).NotTo(HaveOccurred())
	mutate(cc)
	extra = extra.Clone()
	extra.KubernetesVersion = ptr.To(version)
	data, err := kubeadmtypes.MarshalClusterConfigurationForVersion(cc, semver.MustParse(strings.TrimPrefix(version, "v")), extra)
	g.Expect(err).NotTo(HaveOccurred())
	cm.Data[clusterConfigurationKey] = data
	g.Expect(tc.client.Update(ctx, cm)).To(Succeed())
}

func kubeProxyPods(t *testing.T, tc *testCluster, node string) []corev1.Pod {
	t.Helper()
	list := &corev1.PodList{}
	if err := tc.client.List(context.Background(), list, client.InNamespace("kube-system"),
		client.MatchingLabels{"k8s-app": "kube-proxy"}, client.MatchingFields{"spec.nodeName": node}); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

func conditionOf(n corev1.Node, t corev1.NodeConditionType) corev1.ConditionStatus {
	for _, c := range n.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

func podConditionOf(p *corev1.Pod, t corev1.PodConditionType) corev1.ConditionStatus {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

// Cluster API's in-place updates change a Machine's version without
// replacing it: the same Node then reports the new kubelet version and its
// static Pods run the new version's images; kube-proxy keeps running (its
// image is the DaemonSet's).
func TestEnsureFollowsAnInPlaceVersionChange(t *testing.T) {
	g := NewWithT(t)
	tc := newTestCluster(t)
	ctx := context.Background()
	c := testClusterSpec(t)
	cp, w := controlPlaneNode("cp-0", "10.0.0.10"), workerNode("w-0", "10.0.1.10")
	mustEnsure(t, tc, c, cp)
	mustEnsure(t, tc, c, w)
	before := &corev1.Node{}
	g.Expect(tc.client.Get(ctx, client.ObjectKey{Name: "cp-0"}, before)).To(Succeed())

	cp.KubeletVersion, w.KubeletVersion = "v1.37.0", "v1.37.0"
	mustEnsure(t, tc, c, cp)
	mustEnsure(t, tc, c, w)

	for _, name := range []string{"cp-0", "w-0"} {
		node := &corev1.Node{}
		g.Expect(tc.client.Get(ctx, client.ObjectKey{Name: name}, node)).To(Succeed())
		g.Expect(node.Status.NodeInfo.KubeletVersion).To(Equal("v1.37.0"), name)
		proxies := &corev1.PodList{}
		g.Expect(tc.client.List(ctx, proxies, client.InNamespace("kube-system"), client.MatchingLabels{"k8s-app": "kube-proxy"})).To(Succeed())
		found := false
		for _, p := range proxies.Items {
			if p.Spec.NodeName == name {
				found = true
			}
		}
		g.Expect(found).To(BeTrue(), "kube-proxy runs on %s", name)
	}
	after := &corev1.Node{}
	g.Expect(tc.client.Get(ctx, client.ObjectKey{Name: "cp-0"}, after)).To(Succeed())
	g.Expect(after.UID).To(Equal(before.UID), "the same Node, not a new one")
	for _, component := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		pod := &corev1.Pod{}
		g.Expect(tc.client.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: component + "-cp-0"}, pod)).To(Succeed())
		g.Expect(pod.Spec.Containers[0].Image).To(HaveSuffix(component+":v1.37.0"), component)
	}
	g.Expect(tc.client.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "etcd-cp-0"}, &corev1.Pod{})).To(Succeed(), "etcd runs again")

	// Once followed, Ensuring writes nothing more.
	rv := tc.store.ResourceVersion()
	mustEnsure(t, tc, c, cp)
	mustEnsure(t, tc, c, w)
	g.Expect(tc.store.ResourceVersion()).To(Equal(rv))
}
