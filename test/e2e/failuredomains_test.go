package e2e

import (
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/remote"

	infrav1 "github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
)

// kcpTimeout bounds a KubeadmControlPlane of three: KCP adds one machine at
// a time, each after the previous one is healthy in the workload cluster.
const kcpTimeout = 5 * time.Minute

// KubeadmControlPlane spreads its machines over the failure domains our
// MonolithCluster reports, and each node is placed in its Machine's
// domain: the Node in the workload cluster carries it as its zone label.
var _ = Describe("A KubeadmControlPlane on a MonolithCluster with failure domains", Ordered, func() {
	const name = "fd"
	var namespace string
	domains := []string{"fd-a", "fd-b", "fd-c"}

	BeforeAll(func(ctx SpecContext) {
		namespace = createNamespace(ctx, "e2e-failure-domains")
		cluster := &clusterv1.Cluster{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
			Spec: clusterv1.ClusterSpec{
				ClusterNetwork:    clusterv1.ClusterNetwork{Pods: clusterv1.NetworkRanges{CIDRBlocks: []string{"192.168.0.0/16"}}},
				ControlPlaneRef:   clusterv1.ContractVersionedObjectReference{APIGroup: controlplanev1.GroupVersion.Group, Kind: "KubeadmControlPlane", Name: name},
				InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "MonolithCluster", Name: name},
			},
		}
		mc := &infrav1.MonolithCluster{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
			Spec:       infrav1.MonolithClusterSpec{Backend: infrav1.ClusterBackend{InMemory: &infrav1.InMemoryClusterBackend{}}},
		}
		for _, d := range domains {
			mc.Spec.FailureDomains = append(mc.Spec.FailureDomains, clusterv1.FailureDomain{Name: d, ControlPlane: ptr.To(true)})
		}
		template := &infrav1.MonolithMachineTemplate{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name + "-control-plane"},
			Spec: infrav1.MonolithMachineTemplateSpec{Template: infrav1.MonolithMachineTemplateResource{Spec: infrav1.MonolithMachineSpec{
				Backend: infrav1.MachineBackend{InMemory: &infrav1.InMemoryMachineBackend{
					ProvisioningDelay: &metav1.Duration{Duration: 500 * time.Millisecond},
					BootstrapDelay:    &metav1.Duration{Duration: 500 * time.Millisecond},
				}},
			}}},
		}
		kcp := &controlplanev1.KubeadmControlPlane{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
			Spec: controlplanev1.KubeadmControlPlaneSpec{
				Replicas: ptr.To[int32](3),
				Version:  kubernetesVersion,
				MachineTemplate: controlplanev1.KubeadmControlPlaneMachineTemplate{Spec: controlplanev1.KubeadmControlPlaneMachineTemplateSpec{
					InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "MonolithMachineTemplate", Name: template.Name},
				}},
			},
		}
		for _, obj := range []client.Object{cluster, mc, template, kcp} {
			Expect(env.Client.Create(ctx, obj)).To(Succeed(), "%T", obj)
		}
	})

	It("should put one control plane machine in each domain, and each Node in its Machine's zone", func(ctx SpecContext) {
		var machines []clusterv1.Machine
		Eventually(func(g Gomega) {
			list := &clusterv1.MachineList{}
			g.Expect(env.Client.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels{clusterv1.MachineControlPlaneNameLabel: name})).To(Succeed())
			g.Expect(list.Items).To(HaveLen(3))
			for _, m := range list.Items {
				g.Expect(m.Status.NodeRef.IsDefined()).To(BeTrue(), "Machine %s has no Node yet", m.Name)
			}
			kcp := &controlplanev1.KubeadmControlPlane{}
			g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, kcp)).To(Succeed())
			g.Expect(kcp.Status.ReadyReplicas).To(HaveValue(BeEquivalentTo(3)))
			machines = list.Items
		}).WithTimeout(kcpTimeout).WithPolling(time.Second).Should(Succeed(), func() string { return describeKCP(ctx, namespace, name) })

		placed := map[string]string{}
		for _, m := range machines {
			placed[m.Name] = m.Spec.FailureDomain
		}
		Expect(placed).To(HaveLen(3))
		Expect(sortedValues(placed)).To(ConsistOf(domains), "one machine per domain: %v", placed)

		cfg, err := remote.RESTConfig(ctx, "e2e", env.Client, client.ObjectKey{Namespace: namespace, Name: name})
		Expect(err).NotTo(HaveOccurred())
		workload, err := kubernetes.NewForConfig(cfg)
		Expect(err).NotTo(HaveOccurred())
		for _, m := range machines {
			node, err := workload.CoreV1().Nodes().Get(ctx, m.Status.NodeRef.Name, metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			Expect(node.Labels).To(HaveKeyWithValue(corev1.LabelTopologyZone, m.Spec.FailureDomain), "Node %s", node.Name)
			Expect(m.Status.FailureDomain).To(Equal(m.Spec.FailureDomain), "Machine %s reports where its node is", m.Name)
		}
	})

	AfterAll(func(ctx SpecContext) {
		deleteClusterAndWait(ctx, namespace, name)
	})
})

func sortedValues(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// describeKCP is the state of a KubeadmControlPlane cluster when a wait
// fails: the conditions of the KCP and of its Machines.
func describeKCP(ctx SpecContext, namespace, name string) string {
	var b strings.Builder
	kcp := &controlplanev1.KubeadmControlPlane{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, kcp); err == nil {
		for _, c := range kcp.Status.Conditions {
			fmt.Fprintf(&b, "KCP %s=%s %s: %s\n", c.Type, c.Status, c.Reason, c.Message)
		}
	}
	list := &clusterv1.MachineList{}
	if err := env.Client.List(ctx, list, client.InNamespace(namespace)); err == nil {
		for _, m := range list.Items {
			fmt.Fprintf(&b, "Machine %s phase=%s domain=%q nodeRef=%v\n", m.Name, m.Status.Phase, m.Spec.FailureDomain, m.Status.NodeRef.Name)
			for _, c := range m.Status.Conditions {
				if c.Status != metav1.ConditionTrue {
					fmt.Fprintf(&b, "  %s=%s %s: %s\n", c.Type, c.Status, c.Reason, c.Message)
				}
			}
		}
	}
	return b.String()
}
