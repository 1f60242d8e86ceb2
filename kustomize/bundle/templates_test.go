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
var flavors = []string{"", "development", "development-mp", "docker", "healthcheck", "ipam", "machinepool", "taints", "topology", "topology-taints"}

// topologyFlavor says whether a flavor's Cluster is of a ClusterClass.
func topologyFlavor(flavor string) bool {
	return strings.HasPrefix(flavor, "topology") || strings.HasPrefix(flavor, "development")
}

// commonVariables are clusterctl's; the provider variables are prefixed
// MONOLITH_ and each has a default (docs/bundles.md lists them).
var commonVariables = []string{"CLUSTER_NAME", "NAMESPACE", "KUBERNETES_VERSION", "CONTROL_PLANE_MACHINE_COUNT", "WORKER_MACHINE_COUNT"}

// clusterAPIVariables are the optional variables Cluster API's own
// templates (CAPD's) use, each with a default here.
var clusterAPIVariables = []string{"POD_CIDR", "SERVICE_CIDR", "SERVICE_DOMAIN"}

// providerVariable says whether v is a variable of ours or one of Cluster
// API's optional ones: either has a default.
func providerVariable(v string) bool {
	return strings.HasPrefix(v, "MONOLITH_") || slices.Contains(clusterAPIVariables, v)
}

// Every flavor's Cluster takes its network from Cluster API's common
// variables, as CAPD's templates do; our earlier MONOLITH_* names still
// work when those are unset.
func TestClusterNetworkVariablesAreClusterAPIsWithOurAliases(t *testing.T) {
	type network struct{ pods, services, domain string }
	for _, tc := range []struct {
		name string
		env  map[string]string
		want network
	}{
		{"defaults", nil, network{"192.168.0.0/16", "10.96.0.0/12", "cluster.local"}},
		{"Cluster API's names", map[string]string{"POD_CIDR": "10.244.0.0/16", "SERVICE_CIDR": "10.95.0.0/16", "SERVICE_DOMAIN": "corp.local"},
			network{"10.244.0.0/16", "10.95.0.0/16", "corp.local"}},
		{"the aliases", map[string]string{"MONOLITH_POD_CIDR": "10.1.0.0/16", "MONOLITH_SERVICE_CIDR": "10.2.0.0/16"},
			network{"10.1.0.0/16", "10.2.0.0/16", "cluster.local"}},
		{"Cluster API's names win over the aliases", map[string]string{
			"POD_CIDR": "10.244.0.0/16", "SERVICE_CIDR": "10.95.0.0/16", "MONOLITH_POD_CIDR": "10.1.0.0/16", "MONOLITH_SERVICE_CIDR": "10.2.0.0/16",
		}, network{"10.244.0.0/16", "10.95.0.0/16", "cluster.local"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			for _, flavor := range flavors {
				g := NewWithT(t)
				clusters := ofKind(template(t, flavor, "default").Objs(), "Cluster")
				g.Expect(clusters).To(HaveLen(1))
				pods, _, _ := unstructured.NestedStringSlice(clusters[0].Object, "spec", "clusterNetwork", "pods", "cidrBlocks")
				services, _, _ := unstructured.NestedStringSlice(clusters[0].Object, "spec", "clusterNetwork", "services", "cidrBlocks")
				domain, _, _ := unstructured.NestedString(clusters[0].Object, "spec", "clusterNetwork", "serviceDomain")
				g.Expect(network{strings.Join(pods, ","), strings.Join(services, ","), domain}).To(Equal(tc.want), "flavor %q", flavor)
			}
		})
	}
}

// startWebhooks runs the binary's own manager (the modules with admission
// webhooks) serving them where the envtest apiserver calls the bundles'
// webhook configurations.
func startWebhooks(t *testing.T) {
	t.Helper()
	wio := env.WebhookInstallOptions
	opts := managertest.Options()
	opts.WebhookPort = wio.LocalServingPort
	opts.WebhookCertDir = wio.LocalServingCertDir
	infraModule := managertest.Infra()
	managertest.Start(t, env.Config, opts, infraModule, managertest.Machinepool(infraModule), managertest.IPAM())
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
					g.Expect(providerVariable(v)).To(BeTrue(), v)
				}
				g.Expect(documented).To(ContainElement(v), "variable %s is not in docs/bundles.md", v)
			}
			kinds := map[string]int{}
			for _, o := range tmpl.Objs() {
				g.Expect(o.GetNamespace()).To(Equal(ns.Name))
				g.Expect(dryRun(ctx, o)).To(Succeed(), "%s %s", o.GetKind(), o.GetName())
				kinds[o.GetKind()]++
			}
			expectKubeadmShape(g, flavor, tmpl.Objs())
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
				g.Expect(providerVariable(v)).To(BeTrue(), v)
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

// TestTemplatesHaveNoBootstrapSecret: the kubeadm providers make every
// bootstrap data Secret (owned by its KubeadmConfig, so clusterctl move
// takes it); a template that ships a Secret of its own is the hack the
// kubeadm providers replaced.
func TestTemplatesHaveNoBootstrapSecret(t *testing.T) {
	for _, flavor := range flavors {
		t.Run("flavor "+strconv.Quote(flavor), func(t *testing.T) {
			g := NewWithT(t)
			objs := template(t, flavor, "default").Objs()
			g.Expect(ofKind(objs, "Secret")).To(BeEmpty())
			for _, o := range objs {
				if ref, ok := nestedMap(o, "spec", "template", "spec", "bootstrap"); ok {
					g.Expect(ref).NotTo(HaveKey("dataSecretName"), "%s %s: bootstrap data comes from a kubeadm config", o.GetKind(), o.GetName())
				}
			}
		})
	}
}

// expectKubeadmShape checks a rendered flavor uses Cluster API's kubeadm
// providers as CAPD's templates do: a KubeadmControlPlane (or, with a
// topology, a ClusterClass whose control plane is a
// KubeadmControlPlaneTemplate) of CONTROL_PLANE_MACHINE_COUNT (3) machines
// from a MonolithMachineTemplate, workers bootstrapped by a
// KubeadmConfigTemplate (a KubeadmConfig for a MachinePool, which takes a
// config), and every reference resolved within the template.
func expectKubeadmShape(g Gomega, flavor string, objs []unstructured.Unstructured) {
	kinds := map[string]int{}
	byKindName := map[string]unstructured.Unstructured{}
	for _, o := range objs {
		kinds[o.GetKind()]++
		byKindName[o.GetKind()+"/"+o.GetName()] = o
	}
	resolves := func(ref map[string]any, from string) {
		g.ExpectWithOffset(1, ref).NotTo(BeNil(), "%s: missing reference", from)
		kind, _ := ref["kind"].(string)
		name, _ := ref["name"].(string)
		g.ExpectWithOffset(1, byKindName).To(HaveKey(kind+"/"+name), "%s references %s %s, which the template lacks", from, kind, name)
	}
	clusters := ofKind(objs, "Cluster")
	g.Expect(clusters).To(HaveLen(1))
	cluster := clusters[0]

	if topologyFlavor(flavor) {
		// clusterctl adds the ClusterClass the Cluster names.
		g.Expect(kinds).To(HaveKeyWithValue("ClusterClass", 1))
		// The workers: MachinePools of the class's machinePools class in
		// development-mp, else MachineDeployments.
		present, absent := "machineDeployments", "machinePools"
		if flavor == "development-mp" {
			present, absent = absent, present
		}
		topologyWorkers, _, _ := unstructured.NestedSlice(cluster.Object, "spec", "topology", "workers", present)
		g.Expect(topologyWorkers).To(ConsistOf(And(HaveKeyWithValue("class", "default-worker"), HaveKey("name"))), "%s of flavor %q", present, flavor)
		g.Expect(toInt64(g, topologyWorkers[0].(map[string]any)["replicas"])).To(BeEquivalentTo(2))
		_, found, _ := unstructured.NestedSlice(cluster.Object, "spec", "topology", "workers", absent)
		g.Expect(found).To(BeFalse(), "%s of flavor %q", absent, flavor)
		r, _, err := unstructured.NestedFieldNoCopy(cluster.Object, "spec", "topology", "controlPlane", "replicas")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(toInt64(g, r)).To(BeEquivalentTo(3))
		class := ofKind(objs, "ClusterClass")[0]
		cp, _ := nestedMap(class, "spec", "controlPlane", "templateRef")
		g.Expect(cp).To(HaveKeyWithValue("kind", "KubeadmControlPlaneTemplate"))
		resolves(cp, "ClusterClass controlPlane")
		infra, _ := nestedMap(class, "spec", "controlPlane", "machineInfrastructure", "templateRef")
		g.Expect(infra).To(HaveKeyWithValue("kind", "MonolithMachineTemplate"))
		resolves(infra, "ClusterClass controlPlane machineInfrastructure")
		for _, workers := range []struct{ field, infraKind string }{
			{"machineDeployments", "MonolithMachineTemplate"},
			{"machinePools", "MonolithMachinePoolTemplate"},
		} {
			classes, _, _ := unstructured.NestedSlice(class.Object, "spec", "workers", workers.field)
			g.Expect(classes).To(HaveLen(1), "one %s class", workers.field)
			wc := unstructured.Unstructured{Object: classes[0].(map[string]any)}
			boot, _ := nestedMap(wc, "bootstrap", "templateRef")
			g.Expect(boot).To(HaveKeyWithValue("kind", "KubeadmConfigTemplate"), workers.field)
			resolves(boot, workers.field+" bootstrap")
			inf, _ := nestedMap(wc, "infrastructure", "templateRef")
			g.Expect(inf).To(HaveKeyWithValue("kind", workers.infraKind), workers.field)
			resolves(inf, workers.field+" infrastructure")
		}
		return
	}

	g.Expect(kinds).To(HaveKeyWithValue("KubeadmControlPlane", 1))
	cpRef, _ := nestedMap(cluster, "spec", "controlPlaneRef")
	g.Expect(cpRef).To(HaveKeyWithValue("apiGroup", "controlplane.cluster.x-k8s.io"))
	resolves(cpRef, "Cluster controlPlaneRef")
	infraRef, _ := nestedMap(cluster, "spec", "infrastructureRef")
	resolves(infraRef, "Cluster infrastructureRef")
	kcp := ofKind(objs, "KubeadmControlPlane")[0]
	r, _, err := unstructured.NestedFieldNoCopy(kcp.Object, "spec", "replicas")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(toInt64(g, r)).To(BeEquivalentTo(3))
	version, _, _ := unstructured.NestedString(kcp.Object, "spec", "version")
	g.Expect(version).To(Equal("v1.36.0"))
	machineInfra, _ := nestedMap(kcp, "spec", "machineTemplate", "spec", "infrastructureRef")
	g.Expect(machineInfra).To(HaveKeyWithValue("kind", "MonolithMachineTemplate"))
	resolves(machineInfra, "KubeadmControlPlane machineTemplate")
	// Machines of a KubeadmControlPlane are its own: no MachineDeployment
	// of control plane machines.
	for _, md := range ofKind(objs, "MachineDeployment") {
		labels, _, _ := unstructured.NestedStringMap(md.Object, "spec", "template", "metadata", "labels")
		g.Expect(labels).NotTo(HaveKey("cluster.x-k8s.io/control-plane"), "MachineDeployment %s", md.GetName())
	}

	workerKind, bootstrapKind := "MachineDeployment", "KubeadmConfigTemplate"
	if flavor == "machinepool" {
		workerKind, bootstrapKind = "MachinePool", "KubeadmConfig"
		g.Expect(kinds).To(HaveKeyWithValue("MonolithMachinePool", 1))
	}
	g.Expect(kinds).To(HaveKeyWithValue(workerKind, 1))
	g.Expect(kinds).To(HaveKeyWithValue(bootstrapKind, 1))
	workers := ofKind(objs, workerKind)[0]
	r, _, err = unstructured.NestedFieldNoCopy(workers.Object, "spec", "replicas")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(toInt64(g, r)).To(BeEquivalentTo(2))
	boot, _ := nestedMap(workers, "spec", "template", "spec", "bootstrap", "configRef")
	g.Expect(boot).To(HaveKeyWithValue("kind", bootstrapKind))
	resolves(boot, workerKind+" bootstrap")
	inf, _ := nestedMap(workers, "spec", "template", "spec", "infrastructureRef")
	resolves(inf, workerKind+" infrastructureRef")
}

// nestedMap reads a map field of o, and whether it is there.
func nestedMap(o unstructured.Unstructured, fields ...string) (map[string]any, bool) {
	m, ok, err := unstructured.NestedMap(o.Object, fields...)
	return m, ok && err == nil
}
