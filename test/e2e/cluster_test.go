package e2e

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// The main path of a user: the default flavor (inMemory backend), scaled,
// paused and deleted, one step after the other on the same cluster.
var _ = Describe("A cluster from cluster-template.yaml (inMemory backend)", Ordered, func() {
	const name = "dev"
	var namespace string

	BeforeAll(func(ctx SpecContext) {
		namespace = createNamespace(ctx, "e2e-inmemory")
		vars := templateVars(namespace, name)
		apply(ctx, render("cluster-template.yaml", vars))
	})

	It("should run every Machine: the KubeadmControlPlane's and the MachineDeployment's", func(ctx SpecContext) {
		expectClusterProvisioned(ctx, namespace, name)
		machines := expectMachines(ctx, namespace, name, 2)
		controlPlane := 0
		for _, m := range machines {
			Expect(m.Spec.ProviderID).To(HavePrefix("inmemory://"))
			// Both take kubeadm's bootstrap data: KCP's own KubeadmConfig,
			// or one from the workers' KubeadmConfigTemplate.
			Expect(m.Spec.Bootstrap.ConfigRef.Kind).To(Equal("KubeadmConfig"), "Machine %s", m.Name)
			if _, ok := m.Labels[clusterv1.MachineControlPlaneLabel]; ok {
				controlPlane++
				Expect(m.Labels).To(HaveKeyWithValue(clusterv1.MachineControlPlaneNameLabel, name+"-control-plane"), "KCP made %s", m.Name)
			}
		}
		Expect(controlPlane).To(Equal(1), "one control plane machine")
	})

	It("should scale the MachineDeployment 1→3→1", func(ctx SpecContext) {
		md := name + "-md-0"
		scaleMachineDeployment(ctx, namespace, md, 3)
		expectMachines(ctx, namespace, name, 4)
		scaleMachineDeployment(ctx, namespace, md, 1)
		expectMachines(ctx, namespace, name, 2)
		Eventually(func() ([]unstructured.Unstructured, error) {
			return list(ctx, monolithMachineGVK, namespace)
		}).WithTimeout(deleteTimeout).WithPolling(poll).Should(HaveLen(2), "the scaled-down MonolithMachines are deleted")
	})

	It("should change nothing of a paused cluster, and converge once unpaused", func(ctx SpecContext) {
		cluster := &clusterv1.Cluster{}
		key := client.ObjectKey{Namespace: namespace, Name: name}
		Expect(env.Client.Get(ctx, key, cluster)).To(Succeed())
		base := cluster.DeepCopy()
		paused := true
		cluster.Spec.Paused = &paused
		Expect(env.Client.Patch(ctx, cluster, client.MergeFrom(base))).To(Succeed())

		// Every controller records the pause once, in a Paused condition;
		// from then on nothing of the cluster may change.
		Eventually(func(g Gomega) {
			g.Expect(coreAlive()).To(Succeed())
			for _, gvk := range watchedKinds {
				objs, err := list(ctx, gvk, namespace)
				g.Expect(err).NotTo(HaveOccurred())
				for _, o := range objs {
					g.Expect(pausedCondition(o)).To(BeTrue(), "%s %s records the pause", gvk.Kind, o.GetName())
				}
			}
		}).WithTimeout(provisionTimeout).WithPolling(poll).Should(Succeed())

		before := snapshot(ctx, namespace)
		scaleMachineDeployment(ctx, namespace, name+"-md-0", 3)
		Consistently(func() (map[string]string, error) {
			return versions(ctx, namespace)
		}).WithTimeout(pauseObservation).WithPolling(poll).Should(Equal(before), "objects of a paused cluster changed")

		Expect(env.Client.Get(ctx, key, cluster)).To(Succeed())
		base = cluster.DeepCopy()
		cluster.Spec.Paused = nil
		Expect(env.Client.Patch(ctx, cluster, client.MergeFrom(base))).To(Succeed())
		expectMachines(ctx, namespace, name, 4)
	})

	It("should delete everything of the cluster", func(ctx SpecContext) {
		deleteClusterAndWait(ctx, namespace, name)
	})
})

// pauseObservation is how long a paused cluster is watched for changes.
const pauseObservation = 5 * time.Second

// pausedCondition reports whether the object's Paused condition is True.
func pausedCondition(o unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if ok && m["type"] == "Paused" && m["status"] == string(metav1.ConditionTrue) {
			return true
		}
	}
	return false
}

// watchedKinds are the objects a paused cluster must leave untouched: all
// of it but the MachineDeployment, whose spec the test changes itself.
var watchedKinds = []schema.GroupVersionKind{kubeadmControlPlaneGVK, machineSetGVK, machineGVK, kubeadmConfigGVK, monolithMachineGVK, monolithClusterGVK, clusterv1.GroupVersion.WithKind("Cluster")}

// versions maps kind/name to resourceVersion for every watched object of
// the namespace: any write changes it.
func versions(ctx context.Context, namespace string) (map[string]string, error) {
	out := map[string]string{}
	for _, gvk := range watchedKinds {
		objs, err := list(ctx, gvk, namespace)
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			out[fmt.Sprintf("%s/%s", gvk.Kind, o.GetName())] = o.GetResourceVersion()
		}
	}
	return out, nil
}

func snapshot(ctx context.Context, namespace string) map[string]string {
	v, err := versions(ctx, namespace)
	Expect(err).NotTo(HaveOccurred())
	return v
}
