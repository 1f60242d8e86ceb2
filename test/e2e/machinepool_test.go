package e2e

import (
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

var monolithMachinePoolGVK = schema.GroupVersionKind{Group: "infrastructure.cluster.x-k8s.io", Version: "v1alpha1", Kind: "MonolithMachinePool"}

// The machinepool flavor: a KubeadmControlPlane, and a MachinePool backed
// by a MonolithMachinePool (bootstrapped by one KubeadmConfig), with one
// MonolithMachine and one Machine per instance.
var _ = Describe("A cluster from cluster-template-machinepool.yaml", Ordered, func() {
	const name = "pool"
	var namespace string
	pool := name + "-mp-0"

	BeforeAll(func(ctx SpecContext) {
		namespace = createNamespace(ctx, "e2e-machinepool")
		vars := templateVars(namespace, name)
		vars["WORKER_MACHINE_COUNT"] = "2"
		apply(ctx, render("cluster-template-machinepool.yaml", vars))
		// Cluster API core makes a Machine per instance once it reaches the
		// workload cluster (its MachinePool controller reads the cluster's
		// Nodes first): the KubeadmControlPlane writes <cluster>-kubeconfig
		// and the inMemory backend's workload API answers it.
		expectClusterProvisioned(ctx, namespace, name)
	})

	// expectInstances waits until the pool has n instances: n provider IDs
	// in the MonolithMachinePool and one MonolithMachine (MachinePool
	// Machines) for each.
	expectInstances := func(ctx SpecContext, n int) {
		Eventually(func(g Gomega) {
			g.Expect(coreAlive()).To(Succeed())
			infra, err := get(ctx, monolithMachinePoolGVK, namespace, pool)
			g.Expect(err).NotTo(HaveOccurred())
			ids, _, _ := unstructured.NestedStringSlice(infra.Object, "spec", "providerIDList")
			g.Expect(ids).To(HaveLen(n), "MonolithMachinePool providerIDList")
			replicas, _, _ := unstructured.NestedInt64(infra.Object, "status", "replicas")
			g.Expect(replicas).To(BeEquivalentTo(n), "MonolithMachinePool status.replicas")

			// One MonolithMachine per instance, each with its Node in the
			// workload cluster.
			instances, err := list(ctx, monolithMachineGVK, namespace, client.MatchingLabels{clusterv1.MachinePoolNameLabel: pool})
			g.Expect(err).NotTo(HaveOccurred())
			var instanceIDs []string
			for _, m := range instances {
				id, _, _ := unstructured.NestedString(m.Object, "spec", "providerID")
				instanceIDs = append(instanceIDs, id)
			}
			g.Expect(instanceIDs).To(ConsistOf(ids), "one MonolithMachine per instance")

			// MachinePool Machines: core made one Machine per instance,
			// pointing at its MonolithMachine.
			machines := &clusterv1.MachineList{}
			g.Expect(env.Client.List(ctx, machines, client.InNamespace(namespace), client.MatchingLabels{clusterv1.MachinePoolNameLabel: pool})).To(Succeed())
			var machineInfra []string
			for _, m := range machines.Items {
				if m.DeletionTimestamp.IsZero() {
					machineInfra = append(machineInfra, m.Spec.InfrastructureRef.Name)
				}
			}
			var instanceNames []string
			for _, m := range instances {
				instanceNames = append(instanceNames, m.GetName())
			}
			g.Expect(machineInfra).To(ConsistOf(instanceNames), "one Machine per instance")

			// The MachinePool counts the instances whose Node is ready.
			mp := &clusterv1.MachinePool{}
			g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: pool}, mp)).To(Succeed())
			g.Expect(mp.Status.ReadyReplicas).To(HaveValue(BeEquivalentTo(n)), "MachinePool status.readyReplicas")
		}).WithTimeout(provisionTimeout).WithPolling(poll).Should(Succeed())
	}

	It("should run 2 instances, then 4, then 1", func(ctx SpecContext) {
		expectInstances(ctx, 2)
		for _, n := range []int32{4, 1} {
			By(fmt.Sprintf("scaling the MachinePool to %d", n))
			mp := &clusterv1.MachinePool{}
			Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: pool}, mp)).To(Succeed())
			base := mp.DeepCopy()
			mp.Spec.Replicas = &n
			Expect(env.Client.Patch(ctx, mp, client.MergeFrom(base))).To(Succeed())
			expectInstances(ctx, int(n))
		}
	})

	It("should delete everything of the cluster", func(ctx SpecContext) {
		deleteClusterAndWait(ctx, namespace, name)
		Eventually(func() ([]unstructured.Unstructured, error) {
			return list(ctx, monolithMachinePoolGVK, namespace)
		}).WithTimeout(deleteTimeout).WithPolling(poll).Should(BeEmpty())
	})
})
