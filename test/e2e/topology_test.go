package e2e

import (
	"context"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"

	"github.com/capi-monolith/capi-monolith/dev"
	rtxapi "github.com/capi-monolith/capi-monolith/runtimeext/api"
)

// holdObservation is how long a held deletion is watched to stay held.
const holdObservation = 5 * time.Second

// The topology flavor: Cluster API's topology controller calls the
// runtime extension of this binary (registered by dev's ExtensionConfig)
// for the lifecycle and topology mutation hooks.
var _ = Describe("A cluster from cluster-template-topology.yaml (ClusterClass with our runtime extension)", Ordered, func() {
	const name = "topo"
	var namespace string

	BeforeAll(func(ctx SpecContext) {
		By("waiting for Cluster API core to discover the runtime extension")
		Eventually(func(g Gomega) {
			ext := &runtimev1.ExtensionConfig{}
			g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: dev.DefaultExtensionConfigName}, ext)).To(Succeed())
			g.Expect(ext.Status.Conditions).To(ContainElement(And(HaveField("Type", runtimev1.ExtensionConfigDiscoveredCondition), HaveField("Status", BeEquivalentTo("True")))))
		}).WithTimeout(provisionTimeout).WithPolling(poll).Should(Succeed())

		namespace = createNamespace(ctx, "e2e-topology")
		vars := templateVars(namespace, name)
		objs := render("clusterclass-monolith.yaml", vars)
		for _, o := range objs {
			o.SetNamespace(namespace)
			if o.GetKind() == "ClusterClass" {
				// Our extension patches the class's templates and validates
				// the topology.
				Expect(unstructured.SetNestedSlice(o.Object, append(nestedSlice(o, "spec", "patches"), map[string]any{
					"name": "capi-monolith",
					"external": map[string]any{
						"generatePatchesExtension":   "generate-patches." + dev.DefaultExtensionConfigName,
						"validateTopologyExtension":  "validate-topology." + dev.DefaultExtensionConfigName,
						"discoverVariablesExtension": "discover-variables." + dev.DefaultExtensionConfigName,
					},
				}), "spec", "patches")).To(Succeed())
			}
		}
		apply(ctx, objs)
		// The Cluster may use our variables once the class lists them.
		Eventually(func(g Gomega) {
			g.Expect(coreAlive()).To(Succeed())
			cc := &clusterv1.ClusterClass{}
			g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "monolith"}, cc)).To(Succeed())
			var names []string
			for _, v := range cc.Status.Variables {
				names = append(names, v.Name)
			}
			g.Expect(names).To(ContainElement("monolithAddressPools"), "DiscoverVariables answered")
		}).WithTimeout(provisionTimeout).WithPolling(poll).Should(Succeed())
		// BeforeClusterCreate checks the pool has room for the topology.
		pool := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": monolithIPPoolGVK.GroupVersion().String(),
			"kind":       monolithIPPoolGVK.Kind,
			"metadata":   map[string]any{"name": "nodes", "namespace": namespace},
			"spec":       map[string]any{"addresses": []any{"10.128.20.0/24"}, "prefix": int64(16), "gateway": "10.128.0.1"},
		}}
		apply(ctx, []*unstructured.Unstructured{pool})
		cluster := render("cluster-template-topology.yaml", vars)
		Expect(cluster).To(HaveLen(1))
		c := cluster[0]
		// The pools variable makes our GeneratePatches visible in every
		// MonolithMachineTemplate the topology controller creates.
		Expect(unstructured.SetNestedSlice(c.Object, append(nestedSlice(c, "spec", "topology", "variables"), map[string]any{
			"name":  "monolithAddressPools",
			"value": []any{map[string]any{"kind": "MonolithIPPool", "name": "nodes"}},
		}), "spec", "topology", "variables")).To(Succeed())
		// A MachinePool of the class's machinePools class too: the
		// topology controller makes it from the MonolithMachinePoolTemplate
		// (patched by our extension) and the KubeadmConfigTemplate.
		Expect(unstructured.SetNestedSlice(c.Object, []any{map[string]any{
			"class": "default-worker", "name": "mp-0", "replicas": int64(1),
		}}, "spec", "topology", "workers", "machinePools")).To(Succeed())
		c.SetAnnotations(map[string]string{rtxapi.HoldAnnotation: "BeforeClusterDelete"})
		apply(ctx, cluster)
	})

	It("should call BeforeClusterCreate, GeneratePatches and ValidateTopology", func(ctx SpecContext) {
		Eventually(func(g Gomega) {
			g.Expect(coreAlive()).To(Succeed())
			c := &clusterv1.Cluster{}
			g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, c)).To(Succeed())
			g.Expect(hookCalls("BeforeClusterCreate")).To(BeNumerically(">", 0), "BeforeClusterCreate called; Cluster conditions: %+v", c.Status.Conditions)
			g.Expect(hookEvents(ctx, namespace, name)).To(ContainElement("BeforeClusterCreate"), "an Event records the hook")
		}).WithTimeout(provisionTimeout).WithPolling(poll).Should(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(coreAlive()).To(Succeed())
			objs, err := list(ctx, monolithMachineTemplateGVK, namespace, client.MatchingLabels{clusterv1.ClusterNameLabel: name})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(objs).NotTo(BeEmpty(), "the topology controller creates the cluster's machine templates")
			for _, o := range objs {
				pools := nestedSlice(&o, "spec", "template", "spec", "addressesFromPools")
				g.Expect(pools).To(ContainElement(HaveKeyWithValue("name", "nodes")), "GeneratePatches set the pools of %s", o.GetName())
			}
		}).WithTimeout(provisionTimeout).WithPolling(poll).Should(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(coreAlive()).To(Succeed())
			objs, err := list(ctx, monolithMachinePoolGVK, namespace, client.MatchingLabels{clusterv1.ClusterNameLabel: name})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(objs).To(HaveLen(1), "the topology controller creates the machine pool's MonolithMachinePool")
			pools := nestedSlice(&objs[0], "spec", "template", "addressesFromPools")
			g.Expect(pools).To(ContainElement(HaveKeyWithValue("name", "nodes")), "GeneratePatches set the pools of %s", objs[0].GetName())
			mps := &clusterv1.MachinePoolList{}
			g.Expect(env.Client.List(ctx, mps, client.InNamespace(namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: name})).To(Succeed())
			g.Expect(mps.Items).To(HaveLen(1))
			g.Expect(mps.Items[0].Spec.Template.Spec.Bootstrap.ConfigRef.Kind).To(Equal("KubeadmConfig"), "from the class's KubeadmConfigTemplate")
		}).WithTimeout(provisionTimeout).WithPolling(poll).Should(Succeed())
		Expect(hookCalls("GeneratePatches")).To(BeNumerically(">", 0))
		Expect(hookCalls("ValidateTopology")).To(BeNumerically(">", 0))
		Eventually(func(g Gomega) {
			c := &clusterv1.Cluster{}
			g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, c)).To(Succeed())
			g.Expect(c.Status.Initialization.InfrastructureProvisioned).To(HaveValue(BeTrue()), "the MonolithCluster made from the class is provisioned")
		}).WithTimeout(provisionTimeout).WithPolling(poll).Should(Succeed())
	})

	It("should hold the deletion while the hold annotation names BeforeClusterDelete", func(ctx SpecContext) {
		cluster := &clusterv1.Cluster{}
		key := client.ObjectKey{Namespace: namespace, Name: name}
		Expect(env.Client.Get(ctx, key, cluster)).To(Succeed())
		Expect(env.Client.Delete(ctx, cluster)).To(Succeed())
		Eventually(func() ([]string, error) {
			return hookEvents(ctx, namespace, name)
		}).WithTimeout(provisionTimeout).WithPolling(poll).Should(ContainElement("BeforeClusterDelete"))
		Consistently(func() error {
			return env.Client.Get(ctx, key, &clusterv1.Cluster{})
		}).WithTimeout(holdObservation).WithPolling(poll).Should(Succeed(), "a held Cluster stays")

		Expect(env.Client.Get(ctx, key, cluster)).To(Succeed())
		base := cluster.DeepCopy()
		delete(cluster.Annotations, rtxapi.HoldAnnotation)
		Expect(env.Client.Patch(ctx, cluster, client.MergeFrom(base))).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(env.Client.Get(ctx, key, &clusterv1.Cluster{}))
		}).WithTimeout(deleteTimeout).WithPolling(poll).Should(BeTrue(), "released, the Cluster is deleted")
		expectNothingLeft(ctx, namespace)
	})
})

var monolithMachineTemplateGVK = monolithMachineGVK.GroupVersion().WithKind("MonolithMachineTemplate")

func nestedSlice(o *unstructured.Unstructured, fields ...string) []any {
	s, _, _ := unstructured.NestedSlice(o.Object, fields...)
	return s
}

// hookEvents returns the reasons of the runtime hook Events recorded on the
// Cluster.
func hookEvents(ctx context.Context, namespace, cluster string) ([]string, error) {
	events := &eventsv1.EventList{}
	if err := env.Client.List(ctx, events, client.InNamespace(namespace)); err != nil {
		return nil, err
	}
	var reasons []string
	for _, e := range events.Items {
		if e.Regarding.Kind == "Cluster" && e.Regarding.Name == cluster && strings.HasPrefix(e.Action, "RuntimeHook") {
			reasons = append(reasons, e.Reason)
		}
	}
	return reasons, nil
}

// hookCallsMetric is the extension's counter of answered hook calls, by hook
// and outcome (docs/runtimeext.md).
const hookCallsMetric = "capi_monolith_runtimeext_hook_calls_total"

// hookCalls is how many calls of hook the extension answered, whatever the
// outcome, read from the metrics registry the manager serves (the
// extension runs in this process).
func hookCalls(hook string) float64 {
	families, err := metrics.Registry.Gather()
	Expect(err).NotTo(HaveOccurred())
	var total float64
	for _, f := range families {
		if f.GetName() != hookCallsMetric {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "hook" && l.GetValue() == hook {
					total += m.GetCounter().GetValue()
				}
			}
		}
	}
	return total
}
