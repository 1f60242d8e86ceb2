package e2e

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	addonsv1 "sigs.k8s.io/cluster-api/api/addons/v1beta2"
)

// addonLabel selects the cluster of this container for its
// ClusterResourceSet.
const addonLabel = "e2e.capi-monolith.dev/addons"

// workloadTimeout bounds what happens inside a workload cluster once it is
// Available: an addon applied, a rollout, a Helm release.
const workloadTimeout = 2 * time.Minute

// A workload cluster holds what users put in it (issue 27): what a CNI's
// ClusterResourceSet ships, a Helm chart installed with --wait, and the
// real kubectl's everyday commands, with Pods that run.
var _ = Describe("A workload cluster that holds what users put in it (inMemory backend, KCP 1 + 2 workers)", Ordered, func() {
	const (
		name    = "hold"
		workers = 2
	)
	var (
		namespace  string
		kubeconfig string
		dump       func() string
		dir        string
	)

	BeforeAll(func(ctx SpecContext) {
		namespace = createNamespace(ctx, "e2e-hold")
		dir = GinkgoT().TempDir()
		dump = clusterDump(context.Background(), namespace, name)

		addon, err := os.ReadFile(filepath.Join("testdata", "addon", "addon.yaml"))
		Expect(err).NotTo(HaveOccurred())
		Expect(env.Client.Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "addon"},
			Data:       map[string]string{"addon.yaml": string(addon)},
		})).To(Succeed())
		crs := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": addonsv1.GroupVersion.String(),
			"kind":       "ClusterResourceSet",
			"metadata":   map[string]any{"namespace": namespace, "name": "addon"},
			"spec": map[string]any{
				"clusterSelector": map[string]any{"matchLabels": map[string]any{addonLabel: "true"}},
				"resources":       []any{map[string]any{"kind": "ConfigMap", "name": "addon"}},
				"strategy":        "ApplyOnce",
			},
		}}
		Expect(env.Client.Create(ctx, crs)).To(Succeed())

		vars := templateVars(namespace, name)
		vars["WORKER_MACHINE_COUNT"] = "2"
		objs := render("cluster-template.yaml", vars)
		for _, o := range objs {
			if o.GetKind() == "Cluster" {
				labels := o.GetLabels()
				if labels == nil {
					labels = map[string]string{}
				}
				labels[addonLabel] = "true"
				o.SetLabels(labels)
			}
		}
		apply(ctx, objs)
		expectAlive(ctx, namespace, name, 1, workers, kubernetesVersion, dump)
		kubeconfig = workloadKubeconfig(ctx, dir, namespace, name)
	})

	It("should apply a CNI-like ClusterResourceSet (ServiceAccount, RBAC, ConfigMap, DaemonSet, Service, CRD) with a running agent on every Node", func(ctx SpecContext) {
		Eventually(ctx, func(g Gomega) {
			crs, err := get(ctx, addonsv1.GroupVersion.WithKind("ClusterResourceSet"), namespace, "addon")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(conditionStatus(crs, addonsv1.ClusterResourceSetResourcesAppliedCondition)).To(Equal("True"), "ResourcesApplied: %v", crs.Object["status"])
		}).WithTimeout(workloadTimeout).WithPolling(alivePoll).Should(Succeed(), dump)

		for _, what := range [][]string{
			{"serviceaccount", "addon-agent", "-n", "kube-system"},
			{"clusterrole", "addon-agent"},
			{"clusterrolebinding", "addon-agent"},
			{"configmap", "addon-agent-config", "-n", "kube-system"},
			{"daemonset", "addon-agent", "-n", "kube-system"},
			{"service", "addon-agent-metrics", "-n", "kube-system"},
			{"customresourcedefinition", "policies.addons.e2e.capi-monolith.dev"},
		} {
			out, err := kubectl(ctx, kubeconfig, append([]string{"get", "-o", "name"}, what...)...)
			Expect(err).NotTo(HaveOccurred())
			Expect(out).To(ContainSubstring(what[1]))
		}
		// The CRD's resource is served: a policy can be made and read back.
		policy := writeFile(dir, "policy.yaml", `apiVersion: addons.e2e.capi-monolith.dev/v1
kind: Policy
metadata:
  name: default
spec:
  action: allow
`)
		_, err := kubectl(ctx, kubeconfig, "apply", "-f", policy)
		Expect(err).NotTo(HaveOccurred())
		out, err := kubectl(ctx, kubeconfig, "get", "pol", "default", "-o", "jsonpath={.spec.action}")
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(Equal("allow"))

		Eventually(ctx, func(g Gomega) {
			_, nodes, err := readyNodes(ctx, kubeconfig)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(nodes).To(HaveLen(1 + workers))
			out, err := kubectl(ctx, kubeconfig, "get", "pods", "-n", "kube-system", "-l", "app=addon-agent",
				"-o", `jsonpath={range .items[*]}{.spec.nodeName} {.status.phase} {.status.podIP}{"\n"}{end}`)
			g.Expect(err).NotTo(HaveOccurred())
			var onNodes []string
			for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
				f := strings.Fields(line)
				g.Expect(f).To(HaveLen(3), "an agent Pod without a node or an IP: %q", line)
				g.Expect(f[1]).To(Equal("Running"), "agent Pod on %s", f[0])
				onNodes = append(onNodes, f[0])
			}
			g.Expect(onNodes).To(ConsistOf(nodes), "one agent Pod per Node")
			ds, err := kubectl(ctx, kubeconfig, "get", "ds", "addon-agent", "-n", "kube-system", "-o", "jsonpath={.status.numberReady}/{.status.desiredNumberScheduled}")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(ds).To(Equal("3/3"))
		}).WithTimeout(workloadTimeout).WithPolling(alivePoll).Should(Succeed(), dump)
	})

	It("should answer the real kubectl: api-resources, apply --server-side, diff, rollout status, wait, auth, get all, cascading delete", func(ctx SpecContext) {
		out, err := kubectl(ctx, kubeconfig, "api-resources", "-o", "name")
		Expect(err).NotTo(HaveOccurred())
		for _, r := range []string{"deployments.apps", "replicasets.apps", "statefulsets.apps", "jobs.batch", "cronjobs.batch",
			"services", "endpointslices.discovery.k8s.io", "customresourcedefinitions.apiextensions.k8s.io",
			"selfsubjectaccessreviews.authorization.k8s.io", "policies.addons.e2e.capi-monolith.dev"} {
			Expect(strings.Fields(out)).To(ContainElement(r))
		}

		web := webDeployment(2)
		manifest := writeFile(dir, "web.yaml", web)
		_, err = kubectl(ctx, kubeconfig, "apply", "--server-side", "--field-manager", "e2e", "-f", manifest)
		Expect(err).NotTo(HaveOccurred())
		_, err = kubectl(ctx, kubeconfig, "rollout", "status", "deployment/web", "--timeout", "100s")
		Expect(err).NotTo(HaveOccurred())
		_, err = kubectl(ctx, kubeconfig, "wait", "--for", "condition=Available", "deployment/web", "--timeout", "60s")
		Expect(err).NotTo(HaveOccurred())

		// kubectl diff exits 1 when the live object differs from the file.
		changed := writeFile(dir, "web-3.yaml", webDeployment(3))
		out, err = kubectl(ctx, kubeconfig, "diff", "--server-side", "--field-manager", "e2e", "-f", changed)
		var exit *exec.ExitError
		Expect(errors.As(err, &exit)).To(BeTrue(), "kubectl diff: %v", err)
		Expect(exit.ExitCode()).To(Equal(1), "kubectl diff found no difference: %v", err)
		Expect(out).To(MatchRegexp(`(?m)^-\s+replicas: 2$`))
		Expect(out).To(MatchRegexp(`(?m)^\+\s+replicas: 3$`))
		_, err = kubectl(ctx, kubeconfig, "diff", "--server-side", "--field-manager", "e2e", "-f", manifest)
		Expect(err).NotTo(HaveOccurred(), "no difference against the applied file")

		out, err = kubectl(ctx, kubeconfig, "auth", "can-i", "create", "deployments", "--namespace", "default")
		Expect(err).NotTo(HaveOccurred())
		Expect(strings.TrimSpace(out)).To(Equal("yes"))
		out, err = kubectl(ctx, kubeconfig, "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}")
		Expect(err).NotTo(HaveOccurred())
		Expect(out).NotTo(BeEmpty())

		out, err = kubectl(ctx, kubeconfig, "get", "all", "-A", "-o", "name")
		Expect(err).NotTo(HaveOccurred())
		names := strings.Fields(out)
		Expect(names).To(ContainElement("deployment.apps/web"))
		Expect(names).To(ContainElement("daemonset.apps/addon-agent"))
		Expect(names).To(ContainElement("service/addon-agent-metrics"))
		Expect(names).To(ContainElement(HavePrefix("replicaset.apps/web-")))
		Expect(names).To(ContainElement(HavePrefix("pod/web-")))

		// Foreground: kubectl returns once the Deployment is gone, which is
		// after its ReplicaSet and Pods.
		_, err = kubectl(ctx, kubeconfig, "delete", "deployment", "web", "--cascade=foreground", "--timeout", "60s")
		Expect(err).NotTo(HaveOccurred())
		out, err = kubectl(ctx, kubeconfig, "get", "replicasets,pods", "-l", "app=web", "-o", "name")
		Expect(err).NotTo(HaveOccurred())
		Expect(strings.TrimSpace(out)).To(BeEmpty(), "dependents left after a foreground deletion")

		// Orphan: the ReplicaSet stays, without its owner.
		_, err = kubectl(ctx, kubeconfig, "apply", "--server-side", "--field-manager", "e2e", "-f", manifest)
		Expect(err).NotTo(HaveOccurred())
		_, err = kubectl(ctx, kubeconfig, "rollout", "status", "deployment/web", "--timeout", "100s")
		Expect(err).NotTo(HaveOccurred())
		_, err = kubectl(ctx, kubeconfig, "delete", "deployment", "web", "--cascade=orphan", "--timeout", "60s")
		Expect(err).NotTo(HaveOccurred())
		out, err = kubectl(ctx, kubeconfig, "get", "replicasets", "-l", "app=web", "-o", "jsonpath={range .items[*]}{.metadata.name}:{.metadata.ownerReferences}{\"\\n\"}{end}")
		Expect(err).NotTo(HaveOccurred())
		lines := strings.Split(strings.TrimSpace(out), "\n")
		Expect(lines).To(HaveLen(1))
		Expect(lines[0]).To(HaveSuffix(":"), "the orphaned ReplicaSet keeps no ownerReference")
		// Background (kubectl's default): the orphaned ReplicaSet's Pods go with it.
		_, err = kubectl(ctx, kubeconfig, "delete", "replicasets", "-l", "app=web")
		Expect(err).NotTo(HaveOccurred())
		Eventually(ctx, func(g Gomega) {
			out, err := kubectl(ctx, kubeconfig, "get", "pods", "-l", "app=web", "-o", "name")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(strings.TrimSpace(out)).To(BeEmpty())
		}).WithTimeout(workloadTimeout).WithPolling(alivePoll).Should(Succeed())
	})

	It("should install a Helm chart (Deployment, Service, CRD, custom resource) with --wait and uninstall it cleanly", func(ctx SpecContext) {
		h := newHelm(kubeconfig, "default")
		rel, err := h.install(ctx, filepath.Join("testdata", "charts", "widgets"), "shop", workloadTimeout)
		Expect(err).NotTo(HaveOccurred())
		Expect(rel).To(Equal("deployed"))

		out, err := kubectl(ctx, kubeconfig, "get", "deployment", "shop-server", "-o", "jsonpath={.status.availableReplicas}")
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(Equal("2"))
		out, err = kubectl(ctx, kubeconfig, "get", "widget", "shop-default", "-o", "jsonpath={.spec.size}")
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(Equal("3"))
		out, err = kubectl(ctx, kubeconfig, "get", "endpointslices", "-l", "kubernetes.io/service-name=shop-server",
			"-o", "jsonpath={range .items[*].endpoints[*]}{.addresses[0]}{\"\\n\"}{end}")
		Expect(err).NotTo(HaveOccurred())
		Expect(strings.Fields(out)).To(HaveLen(2), "the Service's EndpointSlice lists both ready Pods")

		Expect(h.uninstall(ctx, "shop", workloadTimeout)).To(Succeed())
		for _, what := range []string{"deployment/shop-server", "service/shop-server", "widget/shop-default"} {
			_, err := kubectl(ctx, kubeconfig, "get", what)
			Expect(err).To(MatchError(ContainSubstring("NotFound")), what)
		}
		out, err = kubectl(ctx, kubeconfig, "get", "pods", "-l", "app.kubernetes.io/instance=shop", "-o", "name")
		Expect(err).NotTo(HaveOccurred())
		Expect(strings.Fields(out)).To(BeEmpty(), "the release's Pods are gone")
		// Helm never deletes the CRDs of a chart's crds/ folder.
		_, err = kubectl(ctx, kubeconfig, "get", "crd", "widgets.e2e.capi-monolith.dev")
		Expect(err).NotTo(HaveOccurred())
	})

	AfterAll(func(ctx SpecContext) {
		deleteClusterAndWait(ctx, namespace, name)
	})
})

func webDeployment(replicas int) string {
	return `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: default
  labels:
    app: web
spec:
  replicas: ` + strconv.Itoa(replicas) + `
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
      - name: web
        image: registry.k8s.io/pause:3.10
`
}

func writeFile(dir, name, content string) string {
	path := filepath.Join(dir, name)
	Expect(os.WriteFile(path, []byte(content), 0o600)).To(Succeed())
	return path
}

// conditionStatus is the status of an unstructured object's condition,
// empty when it has none of that type.
func conditionStatus(obj *unstructured.Unstructured, conditionType string) string {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if ok && m["type"] == conditionType {
			s, _ := m["status"].(string)
			return s
		}
	}
	return ""
}
