package infra_test

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	infrav1 "github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/test/kubeadmdata"
	"github.com/capi-monolith/capi-monolith/test/managertest"
)

// ownedInMemoryCluster starts the infra module and makes an inMemory
// cluster in a namespace of its own, with the owner reference Cluster API
// sets.
func ownedInMemoryCluster(t *testing.T, g Gomega) (*clusterv1.Cluster, *infrav1.MonolithCluster) {
	t.Helper()
	start(t, managertest.Infra())
	ns, err := env.CreateNamespace(ctx, "infra")
	g.Expect(err).NotTo(HaveOccurred())
	cluster, mc := newInMemoryCluster(g, ns.Name, "c1")
	patch := client.MergeFrom(mc.DeepCopy())
	mc.OwnerReferences = ownedBy(cluster, "Cluster")
	g.Expect(env.Client.Patch(ctx, mc, patch)).To(Succeed())
	return cluster, mc
}

// Every write of a MonolithCluster wakes Cluster API core's Cluster
// controller, which at scale answers each with status patches and their
// conflicts. Once Cluster API has set the owner reference, provisioning an
// inMemory cluster writes it three times: the finalizer, the endpoint, and a
// status whose conditions already name the generation the endpoint made,
// so that nothing is left for a later reconcile to write.
func TestInMemoryClusterProvisionsInThreeWrites(t *testing.T) {
	g := NewWithT(t)
	_, mc := ownedInMemoryCluster(t, g)

	// Every change after the owner reference, whenever the watch starts.
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	w, err := wc.Watch(ctx, &infrav1.MonolithClusterList{}, client.InNamespace(mc.Namespace),
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: mc.ResourceVersion}})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(w.Stop)
	var writes []*infrav1.MonolithCluster
	drain := func() int {
		for {
			select {
			case ev := <-w.ResultChan():
				g.Expect(ev.Type).To(Equal(watch.Modified), "%v", ev.Object)
				writes = append(writes, ev.Object.(*infrav1.MonolithCluster))
			default:
				return len(writes)
			}
		}
	}

	g.Eventually(func(g Gomega) {
		g.Expect(drain()).NotTo(BeZero())
		last := writes[len(writes)-1]
		g.Expect(last.Status.Initialization.Provisioned).To(Equal(ptr.To(true)))
		g.Expect(conditions.IsTrue(last, clusterv1.ReadyCondition)).To(BeTrue())
	}, timeout).Should(Succeed())
	g.Consistently(drain, 2*time.Second).Should(Equal(len(writes)), "no write once provisioned")

	g.Expect(writes).To(HaveLen(3), "the finalizer, the endpoint, the status")
	g.Expect(writes[0].Finalizers).To(ContainElement(infrav1.ClusterFinalizer))
	g.Expect(writes[1].Spec.ControlPlaneEndpoint.IsValid()).To(BeTrue())
	last := writes[2]
	for _, c := range last.Status.Conditions {
		g.Expect(c.ObservedGeneration).To(Equal(last.Generation), "condition %s", c.Type)
	}
}

// Every write of a MonolithMachine is a change Cluster API core's Machine
// controller mirrors (its InfrastructureReady condition), and each of those
// wakes the MachineSet, MachineDeployment, KubeadmControlPlane and Cluster
// controllers. An inMemory machine with the simulated delays `dev`'s
// templates use (provisioning and bootstrap of 1 s each) and its bootstrap
// data ready is not written before Cluster API sets its owner reference,
// and after it four times: the finalizer with the provider ID, the node
// being made, the bootstrap running (its own message, not a placeholder the
// next reconcile replaces), and Ready.
func TestInMemoryMachineWithDelaysProvisionsInFourWrites(t *testing.T) {
	g := NewWithT(t)
	cluster, mc := ownedInMemoryCluster(t, g)
	statusPatch := client.MergeFrom(cluster.DeepCopy())
	cluster.Status.Initialization.InfrastructureProvisioned = ptr.To(true)
	g.Expect(env.Client.Status().Patch(ctx, cluster, statusPatch)).To(Succeed())

	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: mc.Namespace, Name: "m-bootstrap"}, Data: map[string][]byte{"value": []byte(kubeadmdata.JoinWorker)}}
	g.Expect(env.Client.Create(ctx, secret)).To(Succeed())
	machine := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: mc.Namespace, Name: "m", Labels: map[string]string{clusterv1.ClusterNameLabel: "c1"}},
		Spec: clusterv1.MachineSpec{ClusterName: "c1",
			Bootstrap:         clusterv1.Bootstrap{DataSecretName: ptr.To(secret.Name)},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "MonolithMachine", Name: "m"}},
	}
	g.Expect(env.Client.Create(ctx, machine)).To(Succeed())
	mm := &infrav1.MonolithMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: mc.Namespace, Name: "m", Labels: map[string]string{clusterv1.ClusterNameLabel: "c1"}},
		Spec: infrav1.MonolithMachineSpec{Backend: infrav1.MachineBackend{InMemory: &infrav1.InMemoryMachineBackend{
			ProvisioningDelay: &metav1.Duration{Duration: time.Second},
			BootstrapDelay:    &metav1.Duration{Duration: time.Second},
		}}},
	}

	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	w, err := wc.Watch(ctx, &infrav1.MonolithMachineList{}, client.InNamespace(mc.Namespace))
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(w.Stop)
	g.Expect(env.Client.Create(ctx, mm)).To(Succeed())
	var writes []*infrav1.MonolithMachine
	drain := func() int {
		for {
			select {
			case ev := <-w.ResultChan():
				if ev.Type == watch.Added {
					continue
				}
				g.Expect(ev.Type).To(Equal(watch.Modified), "%v", ev.Object)
				writes = append(writes, ev.Object.(*infrav1.MonolithMachine))
			default:
				return len(writes)
			}
		}
	}

	// Made by a MachineSet, the machine has no owner reference until core's
	// Machine controller sets it.
	g.Consistently(drain, 2*time.Second).Should(BeZero(), "nothing written before the owner reference")
	patch := client.MergeFrom(mm.DeepCopy())
	mm.OwnerReferences = ownedBy(machine, "Machine")
	g.Expect(env.Client.Patch(ctx, mm, patch)).To(Succeed())
	g.Eventually(drain, timeout).ShouldNot(BeZero())
	g.Expect(writes[0].OwnerReferences).NotTo(BeEmpty(), "the owner reference, the test's own write")
	writes = writes[1:]

	g.Eventually(func(g Gomega) {
		g.Expect(drain()).NotTo(BeZero())
		g.Expect(conditions.IsTrue(writes[len(writes)-1], clusterv1.ReadyCondition)).To(BeTrue())
	}, timeout).Should(Succeed())
	describe := func() []string {
		var out []string
		for _, w := range writes {
			c := conditions.Get(w, clusterv1.ReadyCondition)
			if c == nil {
				out = append(out, fmt.Sprintf("gen %d, no Ready", w.Generation))
				continue
			}
			var others []string
			for _, o := range w.Status.Conditions {
				others = append(others, fmt.Sprintf("%s=%s/%s/%d", o.Type, o.Status, o.Reason, o.ObservedGeneration))
			}
			out = append(out, fmt.Sprintf("gen %d, Ready %s %s %q %v fin %v wn %v", w.Generation, c.Status, c.Reason, c.Message, others, w.Finalizers, w.Status.WorkloadNode))
		}
		return out
	}
	g.Consistently(drain, 2*time.Second).Should(Equal(len(writes)), func() string { return fmt.Sprintf("no write once Ready: %q", describe()) })
	ready := describe()
	t.Logf("each write: %q", ready)
	g.Expect(writes).To(HaveLen(4), "the finalizer, the node being made, the bootstrap running, Ready: %q", ready)
	g.Expect(writes[0].Finalizers).To(ContainElement(infrav1.MachineFinalizer))
	g.Expect(writes[0].Spec.ProviderID).NotTo(BeEmpty())
	g.Expect(conditions.GetReason(writes[1], infrav1.BackendMachineProvisionedCondition)).To(Equal(infrav1.RunningReason))
	g.Expect(conditions.GetMessage(writes[2], infrav1.BootstrapExecSucceededCondition)).To(Equal("Running kubeadm join (simulated, 1s)"))
}
