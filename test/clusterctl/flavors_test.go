package clusterctl_test

import (
	"cmp"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterctl "sigs.k8s.io/cluster-api/cmd/clusterctl/client"

	"github.com/capi-monolith/capi-monolith/kustomize/bundle"
	"github.com/capi-monolith/capi-monolith/test/envtest"
	"github.com/capi-monolith/capi-monolith/test/managertest"
)

// TestEveryFlavorPassesClusterAPIAndOurWebhooks renders every flavor with
// clusterctl's `generate cluster` code and creates its objects, dry-run,
// on a `capi-monolith dev` management cluster: Cluster API core's, the
// kubeadm providers' and our admission webhooks all accept them (a
// KubeadmControlPlane, KubeadmConfig(Template) or ClusterClass a webhook
// refuses fails here, where the bundle tests' apiserver has only ours).
func TestEveryFlavorPassesClusterAPIAndOurWebhooks(t *testing.T) {
	ctx := t.Context()
	g := NewWithT(t)
	scheme, err := envtest.NewScheme()
	g.Expect(err).NotTo(HaveOccurred())
	for _, mod := range managertest.All() {
		g.Expect(mod.AddToScheme(scheme)).To(Succeed())
	}
	m := startProcess(t, scheme)

	dir := t.TempDir()
	g.Expect(bundle.Write(dir, bundle.Options{Version: oldVersion})).To(Succeed())
	c, err := clusterctl.New(ctx, filepath.Join(dir, bundle.ClusterctlConfigFile))
	g.Expect(err).NotTo(HaveOccurred())
	for _, flavor := range []string{"", "development", "development-mp", "docker", "ipam", "machinepool", "topology"} {
		t.Run("flavor "+strconv.Quote(flavor), func(t *testing.T) {
			g := NewWithT(t)
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "flavor-"}}
			g.Expect(m.client.Create(ctx, ns)).To(Succeed())
			tmpl, err := c.GetClusterTemplate(ctx, clusterctl.GetClusterTemplateOptions{
				Kubeconfig: clusterctl.Kubeconfig{Path: m.kubeconfig},
				ProviderRepositorySource: &clusterctl.ProviderRepositorySourceOptions{
					InfrastructureProvider: bundle.ProviderName + ":" + oldVersion,
					Flavor:                 flavor,
				},
				TargetNamespace:          ns.Name,
				ClusterName:              "dev",
				KubernetesVersion:        "v1.36.0",
				ControlPlaneMachineCount: ptr.To[int64](3),
				WorkerMachineCount:       ptr.To[int64](2),
			})
			g.Expect(err).NotTo(HaveOccurred())
			kinds := map[string]bool{}
			objs := tmpl.Objs()
			// The Cluster last: a topology Cluster is checked against its
			// ClusterClass, which a dry-run does not store, so the class
			// and its templates (inert without a Cluster) are created.
			slices.SortStableFunc(objs, func(a, b unstructured.Unstructured) int {
				return cmp.Compare(btoi(a.GetKind() == "Cluster"), btoi(b.GetKind() == "Cluster"))
			})
			for _, o := range objs {
				kinds[o.GetKind()] = true
				var opts []client.CreateOption
				if o.GetKind() != "ClusterClass" && !isClassTemplate(flavor, o.GetKind()) {
					opts = append(opts, client.DryRunAll)
				}
				g.Expect(m.client.Create(ctx, &o, opts...)).To(Succeed(), "%s %s", o.GetKind(), o.GetName())
			}
			if isTopology(flavor) {
				g.Expect(kinds).To(HaveKey("ClusterClass"), "the flavor is self-contained: clusterctl adds its ClusterClass")
				return
			}
			g.Expect(kinds).To(HaveKey("KubeadmControlPlane"))
			// The control plane provider's webhook did answer: it refuses
			// what only it checks.
			for _, o := range objs {
				if o.GetKind() != "KubeadmControlPlane" {
					continue
				}
				bad := o.DeepCopy()
				g.Expect(unstructured.SetNestedField(bad.Object, "not-a-version", "spec", "version")).To(Succeed())
				g.Expect(m.client.Create(ctx, bad, client.DryRunAll)).To(MatchError(ContainSubstring("admission webhook")))
			}
		})
	}
}

// isTopology reports whether a flavor's Cluster is of a ClusterClass.
func isTopology(flavor string) bool {
	return flavor == "topology" || strings.HasPrefix(flavor, "development")
}

// isClassTemplate reports whether kind is one of the templates a topology
// flavor's ClusterClass references.
func isClassTemplate(flavor, kind string) bool {
	if !isTopology(flavor) {
		return false
	}
	switch kind {
	case "MonolithClusterTemplate", "MonolithMachineTemplate", "MonolithMachinePoolTemplate",
		"KubeadmControlPlaneTemplate", "KubeadmConfigTemplate":
		return true
	}
	return false
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
