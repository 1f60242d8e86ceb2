package infra_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	infrav1 "github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	ipamv1alpha1 "github.com/capi-monolith/capi-monolith/ipam/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/modules"
	"github.com/capi-monolith/capi-monolith/test/kubeadmdata"
	"github.com/capi-monolith/capi-monolith/test/managertest"
)

const timeout = 30 * time.Second

var ctx = context.Background()

// start runs the binary's manager with the given modules and no webhooks,
// until the test ends or stop is called.
func start(t *testing.T, mods ...modules.Module) (stop func()) {
	t.Helper()
	return managertest.Start(t, env.Config, managertest.Options(), mods...)
}

func get(g Gomega, obj client.Object) {
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj)).To(Succeed())
}

func gone(obj client.Object) func() bool {
	return func() bool { return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj)) }
}

func ownedBy(owner client.Object, kind string) []metav1.OwnerReference {
	gvk := owner.GetObjectKind().GroupVersionKind()
	apiVersion := gvk.GroupVersion().String()
	if kind == "Cluster" || kind == "Machine" {
		apiVersion = clusterv1.GroupVersion.String()
	}
	return []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: owner.GetName(), UID: owner.GetUID()}}
}

// newInMemoryCluster creates a Cluster and its inMemory MonolithCluster,
// without the owner reference Cluster API core would set.
func newInMemoryCluster(g Gomega, namespace, name string) (*clusterv1.Cluster, *infrav1.MonolithCluster) {
	cluster := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
			APIGroup: infrav1.GroupVersion.Group, Kind: "MonolithCluster", Name: name}},
	}
	g.Expect(env.Client.Create(ctx, cluster)).To(Succeed())
	mc := &infrav1.MonolithCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{clusterv1.ClusterNameLabel: name}},
		Spec:       infrav1.MonolithClusterSpec{Backend: infrav1.ClusterBackend{InMemory: &infrav1.InMemoryClusterBackend{}}},
	}
	g.Expect(env.Client.Create(ctx, mc)).To(Succeed())
	return cluster, mc
}

// The whole inMemory path with addresses from an IP pool: what Cluster API
// core would do (owner references, infrastructureProvisioned) the test does.
func TestInMemoryClusterAndMachineWithPoolAddressesProvisionAndDelete(t *testing.T) {
	g := NewWithT(t)
	start(t, managertest.Infra(), managertest.IPAM())
	ns, err := env.CreateNamespace(ctx, "infra")
	g.Expect(err).NotTo(HaveOccurred())
	n := ns.Name

	cluster, mc := newInMemoryCluster(g, n, "c1")
	g.Consistently(func(g Gomega) {
		get(g, mc)
		g.Expect(mc.Finalizers).To(BeEmpty())
	}, "1s").Should(Succeed(), "no finalizer before Cluster API sets the owner reference")

	patch := client.MergeFrom(mc.DeepCopy())
	mc.OwnerReferences = ownedBy(cluster, "Cluster")
	g.Expect(env.Client.Patch(ctx, mc, patch)).To(Succeed())
	g.Eventually(func(g Gomega) {
		get(g, mc)
		g.Expect(mc.Finalizers).To(ContainElement(infrav1.ClusterFinalizer))
		g.Expect(mc.Status.Initialization.Provisioned).To(Equal(ptr.To(true)))
		// The endpoint is the cluster's workload API listener.
		g.Expect(mc.Spec.ControlPlaneEndpoint.Host).To(Equal("127.0.0.1"))
		g.Expect(mc.Spec.ControlPlaneEndpoint.Port).To(BeNumerically(">=", 20000))
		g.Expect(conditions.IsTrue(mc, clusterv1.ReadyCondition)).To(BeTrue())
		g.Expect(conditions.IsTrue(mc, infrav1.LoadBalancerAvailableCondition)).To(BeTrue())
	}, timeout).Should(Succeed())

	statusPatch := client.MergeFrom(cluster.DeepCopy())
	cluster.Status.Initialization.InfrastructureProvisioned = ptr.To(true)
	g.Expect(env.Client.Status().Patch(ctx, cluster, statusPatch)).To(Succeed())

	pool := &ipamv1alpha1.MonolithIPPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: n, Name: "nodes"},
		Spec:       ipamv1alpha1.IPPoolSpec{Addresses: []string{"192.168.10.10-192.168.10.20"}, Prefix: 24, Gateway: "192.168.10.1"},
	}
	g.Expect(env.Client.Create(ctx, pool)).To(Succeed())
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: n, Name: "m1-bootstrap"}, Data: map[string][]byte{"value": []byte(kubeadmdata.JoinWorker)}}
	g.Expect(env.Client.Create(ctx, secret)).To(Succeed())
	machine := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: n, Name: "m1", Labels: map[string]string{clusterv1.ClusterNameLabel: "c1"}},
		Spec: clusterv1.MachineSpec{
			ClusterName: "c1", Version: "v1.36.3",
			Bootstrap:         clusterv1.Bootstrap{DataSecretName: ptr.To("m1-bootstrap")},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "MonolithMachine", Name: "m1"},
		},
	}
	g.Expect(env.Client.Create(ctx, machine)).To(Succeed())
	poolGroup := ipamv1alpha1.GroupVersion.Group
	mm := &infrav1.MonolithMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: n, Name: "m1", Labels: map[string]string{clusterv1.ClusterNameLabel: "c1"}},
		Spec: infrav1.MonolithMachineSpec{
			Backend:            infrav1.MachineBackend{InMemory: &infrav1.InMemoryMachineBackend{}},
			AddressesFromPools: []corev1.TypedLocalObjectReference{{APIGroup: &poolGroup, Kind: ipamv1alpha1.MonolithIPPoolKind, Name: "nodes"}},
		},
	}
	mm.OwnerReferences = ownedBy(machine, "Machine")
	g.Expect(env.Client.Create(ctx, mm)).To(Succeed())

	g.Eventually(func(g Gomega) {
		get(g, mm)
		g.Expect(mm.Spec.ProviderID).To(Equal("inmemory://" + n + "/m1"))
		g.Expect(mm.Status.Initialization.Provisioned).To(Equal(ptr.To(true)))
		g.Expect(mm.Status.Addresses).To(ContainElement(clusterv1.MachineAddress{Type: clusterv1.MachineInternalIP, Address: "192.168.10.10"}))
		for _, c := range []string{infrav1.IPAddressesClaimedCondition, infrav1.BackendMachineProvisionedCondition, infrav1.BootstrapExecSucceededCondition, clusterv1.ReadyCondition} {
			g.Expect(conditions.IsTrue(mm, c)).To(BeTrue(), c)
		}
	}, timeout).Should(Succeed())

	claim := &ipamv1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: n, Name: "m1-0"}}
	get(g, claim)
	g.Expect(claim.Finalizers).To(ContainElement(infrav1.ClaimFinalizer))
	g.Expect(claim.Spec.ClusterName).To(Equal("c1"))
	g.Expect(claim.OwnerReferences).To(ContainElement(HaveField("Kind", "MonolithMachine")))

	// Deleting the machine releases its address back to the pool.
	g.Expect(env.Client.Delete(ctx, mm)).To(Succeed())
	g.Eventually(gone(mm), timeout).Should(BeTrue())
	g.Eventually(gone(claim), timeout).Should(BeTrue())
	g.Eventually(gone(&ipamv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Namespace: n, Name: "m1-0"}}), timeout).Should(BeTrue())
	g.Eventually(func(g Gomega) int64 {
		get(g, pool)
		return pool.Status.IPAddresses.Used
	}, timeout).Should(BeZero())

	g.Expect(env.Client.Delete(ctx, mc)).To(Succeed())
	g.Eventually(gone(mc), timeout).Should(BeTrue())
}

func TestMachineWaitsForClusterInfrastructureAndBootstrapData(t *testing.T) {
	g := NewWithT(t)
	start(t, managertest.Infra())
	ns, err := env.CreateNamespace(ctx, "infra")
	g.Expect(err).NotTo(HaveOccurred())
	n := ns.Name
	cluster := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: n, Name: "c"},
		Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
			APIGroup: infrav1.GroupVersion.Group, Kind: "MonolithCluster", Name: "c"}},
	}
	g.Expect(env.Client.Create(ctx, cluster)).To(Succeed())
	machine := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: n, Name: "m", Labels: map[string]string{clusterv1.ClusterNameLabel: "c"}},
		Spec: clusterv1.MachineSpec{ClusterName: "c",
			// A bootstrap provider's config that never produces data.
			Bootstrap: clusterv1.Bootstrap{ConfigRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: "bootstrap.cluster.x-k8s.io", Kind: "KubeadmConfig", Name: "m"}},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "MonolithMachine", Name: "m"}},
	}
	g.Expect(env.Client.Create(ctx, machine)).To(Succeed())
	mm := &infrav1.MonolithMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: n, Name: "m", Labels: map[string]string{clusterv1.ClusterNameLabel: "c"}},
		Spec:       infrav1.MonolithMachineSpec{Backend: infrav1.MachineBackend{InMemory: &infrav1.InMemoryMachineBackend{}}},
	}
	mm.OwnerReferences = ownedBy(machine, "Machine")
	g.Expect(env.Client.Create(ctx, mm)).To(Succeed())
	reason := func(g Gomega) string {
		get(g, mm)
		if c := conditions.Get(mm, infrav1.BackendMachineProvisionedCondition); c != nil {
			return c.Reason
		}
		return ""
	}
	g.Eventually(reason, timeout).Should(Equal(infrav1.WaitingForClusterInfrastructureReason))

	statusPatch := client.MergeFrom(cluster.DeepCopy())
	cluster.Status.Initialization.InfrastructureProvisioned = ptr.To(true)
	g.Expect(env.Client.Status().Patch(ctx, cluster, statusPatch)).To(Succeed())
	g.Eventually(reason, timeout).Should(Equal(infrav1.WaitingForBootstrapDataReason))
	// The provider ID is known in advance and written with the finalizer;
	// nothing is provisioned.
	g.Expect(mm.Status.Initialization.Provisioned).To(BeNil())
}
