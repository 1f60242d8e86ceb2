package webhooks_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/test/envtest"
)

// topologyManager is the field manager of Cluster API's topology
// controller (structuredmerge.TopologyManagerName in Cluster API v1.14).
const topologyManager = "capi-topology"

func dockerBackend() v1alpha1.ClusterBackend {
	return v1alpha1.ClusterBackend{Docker: &v1alpha1.DockerClusterBackend{}}
}

func inMemoryBackend() v1alpha1.ClusterBackend {
	return v1alpha1.ClusterBackend{InMemory: &v1alpha1.InMemoryClusterBackend{}}
}

func cluster(ns, name string, spec v1alpha1.MonolithClusterSpec) *v1alpha1.MonolithCluster {
	return &v1alpha1.MonolithCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec}
}

func clusterTemplate(ns, name string, spec v1alpha1.MonolithClusterSpec) *v1alpha1.MonolithClusterTemplate {
	return &v1alpha1.MonolithClusterTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       v1alpha1.MonolithClusterTemplateSpec{Template: v1alpha1.MonolithClusterTemplateResource{Spec: spec}},
	}
}

func dockerMachineBackend() v1alpha1.MachineBackend {
	return v1alpha1.MachineBackend{Docker: &v1alpha1.DockerMachineBackend{}}
}

func inMemoryMachineBackend() v1alpha1.MachineBackend {
	return v1alpha1.MachineBackend{InMemory: &v1alpha1.InMemoryMachineBackend{}}
}

func machine(ns, name string, spec v1alpha1.MonolithMachineSpec) *v1alpha1.MonolithMachine {
	return &v1alpha1.MonolithMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec}
}

func machineTemplate(ns, name string, spec v1alpha1.MonolithMachineSpec) *v1alpha1.MonolithMachineTemplate {
	return &v1alpha1.MonolithMachineTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       v1alpha1.MonolithMachineTemplateSpec{Template: v1alpha1.MonolithMachineTemplateResource{Spec: spec}},
	}
}

// inCluster labels obj as belonging to the Cluster named clusterName.
func inCluster[T client.Object](obj T, clusterName string) T {
	l := obj.GetLabels()
	if l == nil {
		l = map[string]string{}
	}
	l[clusterv1.ClusterNameLabel] = clusterName
	obj.SetLabels(l)
	return obj
}

// capiCluster is a Cluster whose infrastructure is the kind and name given.
func capiCluster(ns, name, infraKind, infraName string) *clusterv1.Cluster {
	group := v1alpha1.GroupVersion.Group
	if infraKind != "MonolithCluster" {
		group = "infrastructure.example.com"
	}
	return &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: clusterv1.ClusterSpec{
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: group, Kind: infraKind, Name: infraName},
		},
	}
}

func poolRef(group, kind, name string) corev1.TypedLocalObjectReference {
	var g *string
	if group != "" {
		g = ptr.To(group)
	}
	return corev1.TypedLocalObjectReference{APIGroup: g, Kind: kind, Name: name}
}

func duration(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }

// createSeen creates obj and waits until the manager's cache, which the
// webhook reads, has it.
func createSeen(t *testing.T, g Gomega, obj client.Object) {
	t.Helper()
	g.Expect(env.Client.Create(t.Context(), obj)).To(Succeed(), "create %T %s", obj, client.ObjectKeyFromObject(obj))
	key := client.ObjectKeyFromObject(obj)
	seen := obj.DeepCopyObject().(client.Object)
	g.Eventually(func() error { return mgr.GetClient().Get(t.Context(), key, seen) }, timeout).Should(Succeed())
}

// applyAs server-side applies obj's spec and annotations as field manager
// owner (envtest.ApplySpec).
func applyAs(t *testing.T, _ Gomega, obj client.Object, owner string, opts ...client.ApplyOption) error {
	t.Helper()
	return env.ApplySpec(t.Context(), obj, owner, opts...)
}

// warningClient is an uncached client whose warnings the test can read.
func warningClient(t *testing.T, g Gomega) (client.Client, *envtest.Warnings) {
	t.Helper()
	c, w, err := env.WarningClient()
	g.Expect(err).NotTo(HaveOccurred())
	return c, w
}

// haveAll matches an error whose message has every substring.
func haveAll(substrings ...string) OmegaMatcher {
	ms := make([]OmegaMatcher, 0, len(substrings))
	for _, s := range substrings {
		ms = append(ms, MatchError(ContainSubstring(s)))
	}
	return And(ms...)
}
