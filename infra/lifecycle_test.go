package infra_test

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	infrav1 "github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/test/kubeadmdata"
	"github.com/capi-monolith/capi-monolith/test/managertest"
)

// fixture is one provisioned cluster, as Cluster API core leaves it, ready
// for machines.
type fixture struct {
	ns      string
	cluster *clusterv1.Cluster
}

func newFixture(t *testing.T, labels map[string]string) fixture {
	t.Helper()
	g := NewWithT(t)
	ns, err := env.CreateNamespace(ctx, "infra")
	g.Expect(err).NotTo(HaveOccurred())
	cluster := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "c", Labels: labels},
		Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
			APIGroup: infrav1.GroupVersion.Group, Kind: "MonolithCluster", Name: "c"}},
	}
	g.Expect(env.Client.Create(ctx, cluster)).To(Succeed())
	mc := &infrav1.MonolithCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "c", Labels: labels},
		Spec:       infrav1.MonolithClusterSpec{Backend: infrav1.ClusterBackend{InMemory: &infrav1.InMemoryClusterBackend{}}},
	}
	g.Expect(env.Client.Create(ctx, mc)).To(Succeed())
	patch := client.MergeFrom(cluster.DeepCopy())
	cluster.Status.Initialization.InfrastructureProvisioned = ptr.To(true)
	g.Expect(env.Client.Status().Patch(ctx, cluster, patch)).To(Succeed())
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "bootstrap"},
		Data: map[string][]byte{"value": []byte(kubeadmdata.JoinWorker)}})).To(Succeed())
	return fixture{ns: ns.Name, cluster: cluster}
}

// machine creates a Machine and its MonolithMachine, which asks for an
// address from each of pools.
func (f fixture) machine(t *testing.T, name string, labels map[string]string, pools ...corev1.TypedLocalObjectReference) *infrav1.MonolithMachine {
	t.Helper()
	g := NewWithT(t)
	all := map[string]string{clusterv1.ClusterNameLabel: "c"}
	for k, v := range labels {
		all[k] = v
	}
	m := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name, Labels: all},
		Spec: clusterv1.MachineSpec{ClusterName: "c", Version: "v1.36.3",
			Bootstrap:         clusterv1.Bootstrap{DataSecretName: ptr.To("bootstrap")},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "MonolithMachine", Name: name}},
	}
	g.Expect(env.Client.Create(ctx, m)).To(Succeed())
	mm := &infrav1.MonolithMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name, Labels: all, OwnerReferences: ownedBy(m, "Machine")},
		Spec: infrav1.MonolithMachineSpec{Backend: infrav1.MachineBackend{InMemory: &infrav1.InMemoryMachineBackend{}},
			AddressesFromPools: pools},
	}
	g.Expect(env.Client.Create(ctx, mm)).To(Succeed())
	return mm
}

func provisioned(g Gomega, mm *infrav1.MonolithMachine) bool {
	get(g, mm)
	return ptr.Deref(mm.Status.Initialization.Provisioned, false) && conditions.IsTrue(mm, clusterv1.ReadyCondition)
}

func TestPausedClusterHoldsItsMachinesUntilUnpaused(t *testing.T) {
	g := NewWithT(t)
	start(t, managertest.Infra())
	f := newFixture(t, nil)
	patch := client.MergeFrom(f.cluster.DeepCopy())
	f.cluster.Spec.Paused = ptr.To(true)
	g.Expect(env.Client.Patch(ctx, f.cluster, patch)).To(Succeed())

	mm := f.machine(t, "m", nil)
	g.Eventually(func(g Gomega) bool {
		get(g, mm)
		return conditions.IsTrue(mm, clusterv1.PausedCondition)
	}, timeout).Should(BeTrue())
	g.Consistently(func(g Gomega) {
		get(g, mm)
		g.Expect(mm.Spec.ProviderID).To(BeEmpty())
		g.Expect(mm.Finalizers).To(BeEmpty())
	}, "2s").Should(Succeed(), "nothing happens to a paused cluster's machine")

	patch = client.MergeFrom(f.cluster.DeepCopy())
	f.cluster.Spec.Paused = ptr.To(false)
	g.Expect(env.Client.Patch(ctx, f.cluster, patch)).To(Succeed())
	g.Eventually(func(g Gomega) bool { return provisioned(g, mm) }, timeout).Should(BeTrue())
	g.Expect(conditions.IsFalse(mm, clusterv1.PausedCondition)).To(BeTrue())
}

func TestWatchFilterIgnoresMachinesWithoutTheLabel(t *testing.T) {
	g := NewWithT(t)
	opts := managertest.Options()
	opts.WatchFilterValue = "mine"
	managertest.Start(t, env.Config, opts, managertest.Infra())
	f := newFixture(t, map[string]string{clusterv1.WatchLabel: "mine"})
	mine := f.machine(t, "mine", map[string]string{clusterv1.WatchLabel: "mine"})
	theirs := f.machine(t, "theirs", nil)
	g.Eventually(func(g Gomega) bool { return provisioned(g, mine) }, timeout).Should(BeTrue())
	g.Consistently(func(g Gomega) {
		get(g, theirs)
		g.Expect(theirs.Finalizers).To(BeEmpty())
		g.Expect(theirs.Status.Conditions).To(BeEmpty())
	}, "2s").Should(Succeed())
}

func TestARestartedManagerReportsTheSameNodes(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, nil)
	stop := managertest.Start(t, env.Config, managertest.Options(), managertest.Infra())
	mm := f.machine(t, "m", nil)
	g.Eventually(func(g Gomega) bool { return provisioned(g, mm) }, timeout).Should(BeTrue())
	before := mm.DeepCopy()
	stop()

	managertest.Start(t, env.Config, managertest.Options(), managertest.Infra())
	// A nudge so that the new manager reconciles the machine now.
	patch := client.MergeFrom(mm.DeepCopy())
	mm.Annotations = map[string]string{"nudge": "1"}
	g.Expect(env.Client.Patch(ctx, mm, patch)).To(Succeed())
	g.Eventually(func(g Gomega) int64 {
		get(g, mm)
		if c := conditions.Get(mm, clusterv1.ReadyCondition); c != nil {
			return c.ObservedGeneration
		}
		return -1
	}, timeout).Should(Equal(mm.Generation))
	g.Consistently(func(g Gomega) {
		get(g, mm)
		g.Expect(mm.Spec.ProviderID).To(Equal(before.Spec.ProviderID))
		g.Expect(mm.Status.Addresses).To(Equal(before.Status.Addresses))
		g.Expect(provisioned(g, mm)).To(BeTrue())
	}, "2s").Should(Succeed())
}

func TestMalformedBootstrapDataIsReportedAndRetried(t *testing.T) {
	g := NewWithT(t)
	start(t, managertest.Infra())
	f := newFixture(t, nil)
	// The fixture's bootstrap Secret, which its machines read, exists but
	// holds no value: emptied before the machine exists, so that no
	// bootstrap from its data can win the race.
	empty := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "bootstrap"}}
	get(g, empty)
	ep := client.MergeFrom(empty.DeepCopy())
	empty.Data = nil
	g.Expect(env.Client.Patch(ctx, empty, ep)).To(Succeed())
	mm := f.machine(t, "m", nil)

	// The patch helper writes conditions and spec in separate requests:
	// wait for both.
	g.Eventually(func(g Gomega) {
		get(g, mm)
		c := conditions.Get(mm, infrav1.BootstrapExecSucceededCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason + ": " + c.Message).To(Equal(infrav1.FailedReason + ": bootstrap data Secret bootstrap has no value"))
		g.Expect(mm.Spec.ProviderID).NotTo(BeEmpty(), "the node exists; only its bootstrap waits")
	}, timeout).Should(Succeed())

	// Fixing the data is picked up by the retry, with no manual step.
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "bootstrap"}}
	get(g, s)
	sp := client.MergeFrom(s.DeepCopy())
	s.Data = map[string][]byte{"value": []byte(kubeadmdata.JoinWorker)}
	g.Expect(env.Client.Patch(ctx, s, sp)).To(Succeed())
	g.Eventually(func(g Gomega) bool { return provisioned(g, mm) }, timeout).Should(BeTrue())
}

// Bootstrap data that inflates (issue 28: a 679 KiB cloud-config whose
// write_files entry gunzipped to 512 MiB made the machine Ready) is refused
// at the decoding bound: the machine is never bootstrapped, and says why.
func TestBootstrapDataThatInflatesIsNeverBootstrapped(t *testing.T) {
	g := NewWithT(t)
	start(t, managertest.Infra())
	f := newFixture(t, nil)
	var gz bytes.Buffer
	w, err := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	g.Expect(err).NotTo(HaveOccurred())
	zeros := make([]byte, 1<<20)
	for range 64 {
		_, err = w.Write(zeros)
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(w.Close()).To(Succeed())
	bomb := "#cloud-config\nwrite_files:\n- path: /big\n  encoding: gz+b64\n  content: " + base64.StdEncoding.EncodeToString(gz.Bytes()) + "\n"
	// The fixture's bootstrap Secret, which its machines read, holds it.
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "bootstrap"}}
	get(g, s)
	sp := client.MergeFrom(s.DeepCopy())
	s.Data = map[string][]byte{"value": []byte(bomb)}
	g.Expect(env.Client.Patch(ctx, s, sp)).To(Succeed())
	mm := f.machine(t, "m", nil)

	g.Eventually(func(g Gomega) {
		get(g, mm)
		c := conditions.Get(mm, infrav1.BootstrapExecSucceededCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(infrav1.InvalidBootstrapDataReason))
		g.Expect(c.Message).To(ContainSubstring("decompresses to more than"))
	}, timeout).Should(Succeed())
	g.Consistently(func(g Gomega) {
		get(g, mm)
		g.Expect(conditions.IsTrue(mm, infrav1.BootstrapExecSucceededCondition)).To(BeFalse())
		g.Expect(conditions.IsTrue(mm, clusterv1.ReadyCondition)).To(BeFalse())
	}, 3*time.Second, 300*time.Millisecond).Should(Succeed())
}

// Well-formed bootstrap data that holds no kubeadm configuration (issue 28:
// the machine was reported BootstrapExecSucceeded and Ready) is never
// bootstrapped by the inMemory backend, which runs only kubeadm's: the
// machine says why, in BootstrapExecSucceeded and in Ready.
func TestBootstrapDataWithoutKubeadmConfigurationIsNeverBootstrapped(t *testing.T) {
	g := NewWithT(t)
	start(t, managertest.Infra())
	f := newFixture(t, nil)
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "bootstrap"}}
	get(g, s)
	sp := client.MergeFrom(s.DeepCopy())
	s.Data = map[string][]byte{"value": []byte("#cloud-config\nwrite_files:\n- path: /etc/motd\n  content: hello\nruncmd:\n- echo hello\n")}
	g.Expect(env.Client.Patch(ctx, s, sp)).To(Succeed())
	mm := f.machine(t, "m", nil)

	g.Eventually(func(g Gomega) {
		get(g, mm)
		c := conditions.Get(mm, infrav1.BootstrapExecSucceededCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(infrav1.UnsupportedBootstrapDataReason))
		g.Expect(c.Message).To(ContainSubstring("no kubeadm InitConfiguration or JoinConfiguration in the cloud-config data"))
		g.Expect(c.Message).To(ContainSubstring("the inMemory backend runs only kubeadm bootstrap data"))
		g.Expect(conditions.GetReason(mm, clusterv1.ReadyCondition)).To(Equal(infrav1.UnsupportedBootstrapDataReason))
	}, timeout).Should(Succeed())
	g.Expect(mm.Spec.ProviderID).NotTo(BeEmpty(), "the node exists; only its bootstrap is refused")
	g.Consistently(func(g Gomega) {
		get(g, mm)
		g.Expect(conditions.IsTrue(mm, infrav1.BootstrapExecSucceededCondition)).To(BeFalse())
		g.Expect(conditions.IsTrue(mm, clusterv1.ReadyCondition)).To(BeFalse())
	}, 3*time.Second, 300*time.Millisecond).Should(Succeed())
}

func TestExternallyManagedClusterIsLeftAlone(t *testing.T) {
	g := NewWithT(t)
	start(t, managertest.Infra())
	ns, err := env.CreateNamespace(ctx, "infra")
	g.Expect(err).NotTo(HaveOccurred())
	cluster := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "c"},
		Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
			APIGroup: infrav1.GroupVersion.Group, Kind: "MonolithCluster", Name: "c"}},
	}
	g.Expect(env.Client.Create(ctx, cluster)).To(Succeed())
	mc := &infrav1.MonolithCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "c",
			Annotations: map[string]string{clusterv1.ManagedByAnnotation: "someone-else"}},
		Spec: infrav1.MonolithClusterSpec{Backend: infrav1.ClusterBackend{InMemory: &infrav1.InMemoryClusterBackend{}}},
	}
	mc.OwnerReferences = ownedBy(cluster, "Cluster")
	g.Expect(env.Client.Create(ctx, mc)).To(Succeed())
	g.Consistently(func(g Gomega) {
		get(g, mc)
		g.Expect(mc.Finalizers).To(BeEmpty())
		g.Expect(mc.Status.Initialization.Provisioned).To(BeNil())
	}, "2s").Should(Succeed())
}
