package chaos

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"
)

// extensionConfigName names the ExtensionConfig registering the manager's
// runtime extension, as `capi-monolith dev` names it; the ClusterClass's
// external patches name its handlers <hook>.<extensionConfigName>.
const extensionConfigName = "capi-monolith"

// topologyPoolName is the MonolithIPPool the topology cluster's
// monolithAddressPools variable names.
const topologyPoolName = "nodes"

var (
	monolithMachineTemplateGVK = monolithMachineGVK.GroupVersion().WithKind("MonolithMachineTemplate")
	monolithClusterTemplateGVK = monolithMachineGVK.GroupVersion().WithKind("MonolithClusterTemplate")
)

// enableTopology registers the manager's runtime extension as the e2e
// suite does: an ExtensionConfig pointing core at the manager's hook
// server (a stable address and CA across the manager's restarts), removed
// at the test's end. It returns once core discovered the extension.
func enableTopology(t *testing.T, m *manager) {
	ctx, g := t.Context(), NewWithT(t)
	ext := &runtimev1.ExtensionConfig{
		ObjectMeta: metav1.ObjectMeta{Name: extensionConfigName},
		Spec: runtimev1.ExtensionConfigSpec{
			ClientConfig:      runtimev1.ClientConfig{URL: m.webhookURL, CABundle: m.webhookCA},
			NamespaceSelector: &metav1.LabelSelector{},
		},
	}
	g.Expect(env.Client.Create(ctx, ext)).To(Succeed())
	// Core stops calling a manager that is gone.
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), ext) })
	g.Eventually(func(g Gomega) {
		g.Expect(capiAlive()).To(Succeed())
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(ext), ext)).To(Succeed())
		g.Expect(ext.Status.Conditions).To(ContainElement(And(
			HaveField("Type", runtimev1.ExtensionConfigDiscoveredCondition),
			HaveField("Status", metav1.ConditionTrue))), "core discovered the runtime extension")
	}).WithTimeout(convergeTimeout).WithPolling(poll).Should(Succeed())
}

// createTopologyCluster applies the ClusterClass with our extension's
// external patches, the pool the cluster's variable names, and the
// topology Cluster, as the e2e suite does.
func createTopologyCluster(ctx context.Context, g Gomega, c *chaosCluster, vars map[string]string) {
	objs := render(g, "clusterclass-monolith.yaml", vars)
	for _, o := range objs {
		o.SetNamespace(c.namespace)
		if o.GetKind() == "ClusterClass" {
			// Our extension patches the class's templates and validates
			// the topology.
			g.Expect(unstructured.SetNestedSlice(o.Object, append(nestedSlice(o, "spec", "patches"), map[string]any{
				"name": "capi-monolith",
				"external": map[string]any{
					"generatePatchesExtension":   "generate-patches." + extensionConfigName,
					"validateTopologyExtension":  "validate-topology." + extensionConfigName,
					"discoverVariablesExtension": "discover-variables." + extensionConfigName,
				},
			}), "spec", "patches")).To(Succeed())
		}
	}
	apply(ctx, g, objs)
	// The Cluster may use our variables once the class lists them: core
	// asked DiscoverVariables (through the faults of the run).
	g.Eventually(func(g Gomega) {
		g.Expect(capiAlive()).To(Succeed())
		cc := &clusterv1.ClusterClass{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: c.namespace, Name: "monolith"}, cc)).To(Succeed())
		var names []string
		for _, v := range cc.Status.Variables {
			names = append(names, v.Name)
		}
		g.Expect(names).To(ContainElement("monolithAddressPools"), "DiscoverVariables answered")
	}).WithTimeout(convergeTimeout).WithPolling(poll).Should(Succeed())
	// BeforeClusterCreate checks the pool has room for the topology.
	pool := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": monolithIPPoolGVK.GroupVersion().String(),
		"kind":       monolithIPPoolGVK.Kind,
		"metadata":   map[string]any{"name": topologyPoolName, "namespace": c.namespace},
		"spec":       map[string]any{"addresses": []any{c.topologyPool.String()}, "prefix": int64(16), "gateway": "10.128.0.1"},
	}}
	apply(ctx, g, []*unstructured.Unstructured{pool})
	cluster := render(g, "cluster-template-topology.yaml", vars)
	g.Expect(cluster).To(HaveLen(1))
	g.Expect(unstructured.SetNestedSlice(cluster[0].Object, append(nestedSlice(cluster[0], "spec", "topology", "variables"), map[string]any{
		"name":  "monolithAddressPools",
		"value": []any{map[string]any{"kind": "MonolithIPPool", "name": topologyPoolName}},
	}), "spec", "topology", "variables")).To(Succeed())
	apply(ctx, g, cluster)
}

// expectTopologyPatched checks what the runtime extension did for a
// topology cluster: BeforeClusterCreate answered (the Event the record
// policy writes) and GeneratePatches set the pool in every
// MonolithMachineTemplate the topology controller made. It returns the
// number of objects it checked.
func expectTopologyPatched(ctx context.Context, g Gomega, c *chaosCluster) int {
	events := &eventsv1.EventList{}
	g.Expect(env.Client.List(ctx, events, client.InNamespace(c.namespace))).To(Succeed())
	var hooks []string
	for _, e := range events.Items {
		if e.Regarding.Kind == "Cluster" && e.Regarding.Name == c.name && strings.HasPrefix(e.Action, "RuntimeHook") {
			hooks = append(hooks, e.Reason)
		}
	}
	g.Expect(hooks).To(ContainElement("BeforeClusterCreate"), "BeforeClusterCreate called for %s/%s", c.namespace, c.name)

	templates, err := list(ctx, monolithMachineTemplateGVK, c.namespace, client.MatchingLabels{clusterv1.ClusterNameLabel: c.name})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(templates).NotTo(BeEmpty(), "the topology controller creates the cluster's machine templates")
	for _, o := range templates {
		pools := nestedSlice(&o, "spec", "template", "spec", "addressesFromPools")
		g.Expect(pools).To(ContainElement(HaveKeyWithValue("name", topologyPoolName)), "GeneratePatches set the pools of %s", o.GetName())
	}
	return len(templates)
}

func nestedSlice(o *unstructured.Unstructured, fields ...string) []any {
	s, _, _ := unstructured.NestedSlice(o.Object, fields...)
	return s
}
