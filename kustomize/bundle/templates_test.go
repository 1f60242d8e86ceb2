package bundle_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterctl "sigs.k8s.io/cluster-api/cmd/clusterctl/client"

	"github.com/capi-monolith/capi-monolith/kustomize/bundle"
	"github.com/capi-monolith/capi-monolith/test/managertest"
)

// flavors are the workload cluster templates of the infrastructure
// provider ("" is cluster-template.yaml).
var flavors = []string{"", "docker", "ipam", "machinepool", "topology"}

// commonVariables are clusterctl's; the provider variables are prefixed
// MONOLITH_ and each has a default (docs/bundles.md lists them).
var commonVariables = []string{"CLUSTER_NAME", "NAMESPACE", "KUBERNETES_VERSION", "CONTROL_PLANE_MACHINE_COUNT", "WORKER_MACHINE_COUNT"}

// startWebhooks runs the binary's own manager (the modules with admission
// webhooks) serving them where the envtest apiserver calls the bundles'
// webhook configurations.
func startWebhooks(t *testing.T) {
	t.Helper()
	wio := env.WebhookInstallOptions
	opts := managertest.Options()
	opts.WebhookPort = wio.LocalServingPort
	opts.WebhookCertDir = wio.LocalServingCertDir
	managertest.Start(t, env.Config, opts, managertest.Infra(), managertest.Machinepool(), managertest.IPAM())
	addr := net.JoinHostPort(wio.LocalServingHost, strconv.Itoa(wio.LocalServingPort))
	NewWithT(t).Eventually(func() error {
		conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // only checks the port serves TLS.
		if err == nil {
			conn.Close()
		}
		return err
	}, timeout).Should(Succeed())
}

// template renders a flavor with clusterctl's `generate cluster` code.
func template(t *testing.T, flavor, namespace string) clusterctl.Template {
	t.Helper()
	g := NewWithT(t)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	g.Expect(env.WriteKubeconfig(kubeconfig)).To(Succeed())
	c, err := clusterctlClient(context.Background())
	g.Expect(err).NotTo(HaveOccurred())
	tmpl, err := c.GetClusterTemplate(context.Background(), clusterctl.GetClusterTemplateOptions{
		Kubeconfig: clusterctl.Kubeconfig{Path: kubeconfig},
		ProviderRepositorySource: &clusterctl.ProviderRepositorySourceOptions{
			InfrastructureProvider: bundle.ProviderName + ":" + testVersion,
			Flavor:                 flavor,
		},
		TargetNamespace:          namespace,
		ClusterName:              "dev",
		KubernetesVersion:        "v1.36.0",
		ControlPlaneMachineCount: ptr.To[int64](3),
		WorkerMachineCount:       ptr.To[int64](2),
	})
	g.Expect(err).NotTo(HaveOccurred(), "clusterctl failed to render flavor %q", flavor)
	return tmpl
}

func dryRun(ctx context.Context, o unstructured.Unstructured) error {
	return env.Client.Create(ctx, &o, client.DryRunAll)
}

func TestTemplatesAreAcceptedByTheAPIServer(t *testing.T) {
	ctx := context.Background()
	startWebhooks(t)
	documented := documentedVariables(t)
	for _, flavor := range flavors {
		t.Run("flavor "+strconv.Quote(flavor), func(t *testing.T) {
			g := NewWithT(t)
			ns, err := env.CreateNamespace(ctx, "template")
			g.Expect(err).NotTo(HaveOccurred())
			tmpl := template(t, flavor, ns.Name)
			for _, v := range tmpl.Variables() {
				if !slices.Contains(commonVariables, v) {
					g.Expect(v).To(HavePrefix("MONOLITH_"))
				}
				g.Expect(documented).To(ContainElement(v), "variable %s is not in docs/bundles.md", v)
			}
			kinds := map[string]int{}
			for _, o := range tmpl.Objs() {
				g.Expect(o.GetNamespace()).To(Equal(ns.Name))
				g.Expect(dryRun(ctx, o)).To(Succeed(), "%s %s", o.GetKind(), o.GetName())
				kinds[o.GetKind()]++
			}
			switch flavor {
			case "topology":
				// clusterctl adds the ClusterClass the Cluster names.
				g.Expect(kinds).To(HaveKeyWithValue("ClusterClass", 1))
				cluster := ofKind(tmpl.Objs(), "Cluster")[0]
				r, _, err := unstructured.NestedFieldNoCopy(cluster.Object, "spec", "topology", "controlPlane", "replicas")
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(toInt64(g, r)).To(BeEquivalentTo(3))
			case "machinepool":
				g.Expect(kinds).To(HaveKeyWithValue("MachinePool", 1))
				g.Expect(kinds).To(HaveKeyWithValue("MonolithMachinePool", 1))
			default:
				g.Expect(kinds).To(HaveKeyWithValue("MachineDeployment", 2))
				replicas := map[string]int64{}
				for _, md := range ofKind(tmpl.Objs(), "MachineDeployment") {
					r, _, err := unstructured.NestedFieldNoCopy(md.Object, "spec", "replicas")
					g.Expect(err).NotTo(HaveOccurred())
					replicas[md.GetName()] = toInt64(g, r)
				}
				g.Expect(replicas).To(Equal(map[string]int64{"dev-control-plane": 3, "dev-md-0": 2}))
			}
			if flavor == "ipam" {
				g.Expect(kinds).To(HaveKeyWithValue("MonolithIPPool", 1))
			}
		})
	}
}

// TestTemplatesAreValidatedByOurWebhooks: a bad provider variable is caught
// by the module's webhook at apply time.
func TestTemplatesAreValidatedByOurWebhooks(t *testing.T) {
	ctx := context.Background()
	startWebhooks(t)
	for _, tc := range []struct {
		flavor, variable, kind string
	}{
		{"", "MONOLITH_NODE_CIDR", "MonolithCluster"},
		{"ipam", "MONOLITH_IPAM_ADDRESSES", "MonolithIPPool"},
	} {
		t.Run(tc.variable, func(t *testing.T) {
			g := NewWithT(t)
			t.Setenv(tc.variable, "not-an-address")
			ns, err := env.CreateNamespace(ctx, "template")
			g.Expect(err).NotTo(HaveOccurred())
			objs := ofKind(template(t, tc.flavor, ns.Name).Objs(), tc.kind)
			g.Expect(objs).To(HaveLen(1))
			err = dryRun(ctx, objs[0])
			g.Expect(apierrors.IsInvalid(err) || apierrors.IsForbidden(err)).To(BeTrue(), "got %v", err)
			g.Expect(err.Error()).To(ContainSubstring("admission webhook"))
			g.Expect(err.Error()).To(ContainSubstring("not-an-address"))
		})
	}
}

// documentedVariables are the ${VARIABLES} named in docs/bundles.md.
func documentedVariables(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../../docs/bundles.md")
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	var out []string
	for _, m := range regexp.MustCompile("`\\$\\{([A-Z_]+)").FindAllStringSubmatch(string(b), -1) {
		out = append(out, m[1])
	}
	return out
}

func TestEveryVariableIsDocumented(t *testing.T) {
	g := NewWithT(t)
	documented := documentedVariables(t)
	for _, v := range componentsVariables {
		g.Expect(documented).To(ContainElement(v))
	}
	// Every template variable of every flavor, found the way clusterctl
	// finds them, without rendering.
	c, err := clusterctlClient(context.Background())
	g.Expect(err).NotTo(HaveOccurred())
	for _, flavor := range flavors {
		tmpl, err := c.GetClusterTemplate(context.Background(), clusterctl.GetClusterTemplateOptions{
			ProviderRepositorySource: &clusterctl.ProviderRepositorySourceOptions{
				InfrastructureProvider: bundle.ProviderName + ":" + testVersion, Flavor: flavor,
			},
			TargetNamespace:   "default",
			ClusterName:       "dev",
			ListVariablesOnly: true,
		})
		g.Expect(err).NotTo(HaveOccurred())
		for _, v := range tmpl.Variables() {
			g.Expect(documented).To(ContainElement(v), "flavor %q", flavor)
		}
		for v, def := range tmpl.VariableMap() {
			if !slices.Contains(commonVariables, v) {
				g.Expect(def).NotTo(BeNil(), fmt.Sprintf("provider variable %s of flavor %q has no default", v, flavor))
				g.Expect(strings.HasPrefix(v, "MONOLITH_")).To(BeTrue())
			}
		}
	}
}

// toInt64 reads a YAML number, whichever numeric type the decoder chose.
func toInt64(g Gomega, v any) int64 {
	switch n := v.(type) {
	case int64:
		return n
	case float64:
		return int64(n)
	}
	g.Expect(v).To(BeNumerically(">=", 0), "not a number: %#v", v)
	return 0
}

// clusterctl move takes what a Cluster owns (and the Secrets it knows by
// name); the bootstrap Secret is neither, so it carries the move label, or
// moved Machines would reference a Secret left in the source.
func TestTemplatesSecretsMoveWithTheirCluster(t *testing.T) {
	for _, flavor := range flavors {
		t.Run("flavor "+strconv.Quote(flavor), func(t *testing.T) {
			g := NewWithT(t)
			for _, o := range template(t, flavor, "default").Objs() {
				if o.GetKind() != "Secret" {
					continue
				}
				g.Expect(o.GetLabels()).To(HaveKeyWithValue("clusterctl.cluster.x-k8s.io/move", ""), "Secret %s", o.GetName())
			}
		})
	}
}
