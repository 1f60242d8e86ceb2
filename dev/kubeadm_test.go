package dev_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	infrav1 "github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
)

// provisionTimeout bounds each wait of the kubeadm flow: certificates,
// the first Machine, its bootstrap data, its MonolithMachine.
const provisionTimeout = 2 * time.Minute

// kubeadmCluster is a Cluster whose control plane is a KubeadmControlPlane
// of one machine on our inMemory backend, as a user would apply it. The
// version has no "v" on purpose: the control plane's defaulting webhook
// adds it.
const kubeadmCluster = `
apiVersion: cluster.x-k8s.io/v1beta2
kind: Cluster
metadata: {name: kcp, namespace: default}
spec:
  clusterNetwork:
    pods: {cidrBlocks: [192.168.0.0/16]}
    services: {cidrBlocks: [10.96.0.0/12]}
  controlPlaneRef: {apiGroup: controlplane.cluster.x-k8s.io, kind: KubeadmControlPlane, name: kcp}
  infrastructureRef: {apiGroup: infrastructure.cluster.x-k8s.io, kind: MonolithCluster, name: kcp}
---
apiVersion: infrastructure.cluster.x-k8s.io/v1alpha1
kind: MonolithCluster
metadata: {name: kcp, namespace: default}
spec:
  backend:
    inMemory: {}
---
apiVersion: infrastructure.cluster.x-k8s.io/v1alpha1
kind: MonolithMachineTemplate
metadata: {name: kcp-control-plane, namespace: default}
spec:
  template:
    spec:
      backend:
        inMemory: {provisioningDelay: 1s, bootstrapDelay: 1s}
---
apiVersion: controlplane.cluster.x-k8s.io/v1beta2
kind: KubeadmControlPlane
metadata: {name: kcp, namespace: default}
spec:
  version: "1.36.3"
  machineTemplate:
    spec:
      infrastructureRef: {apiGroup: infrastructure.cluster.x-k8s.io, kind: MonolithMachineTemplate, name: kcp-control-plane}
      # Refused by KCP's webhook unless dev turns MachineTaintPropagation on.
      taints:
      - {key: example.com/dev, value: "true", effect: NoSchedule, propagation: Always}
  kubeadmConfigSpec:
    initConfiguration:
      nodeRegistration: {criSocket: unix:///var/run/containerd/containerd.sock}
`

// dev runs Cluster API's own kubeadm bootstrap and control plane managers
// beside core: their webhooks answer, and a KubeadmControlPlane on our
// inMemory backend makes its first control plane Machine, whose
// KubeadmConfig gets kubeadm's cloud-init bootstrap data, from which our
// MonolithMachine is provisioned and bootstrapped. (No workload API answers
// yet, so KCP goes no further than that first machine.)
func TestKubeadmBootstrapAndControlPlaneRunAndServe(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	r := startBinary(t, g, dir)
	ctx := t.Context()
	c := r.client

	expectThreeManagersRunAsChildren(g, r)
	expectKubeadmCRDsConvertThroughTheirManager(ctx, g, c)
	expectBootstrapWebhookRefusesWhatOnlyItChecks(ctx, g, c)
	expectClusterctlInventoryAndLabels(ctx, g, c)

	createKubeadmClusterDefaulted(ctx, g, c)
	machine := waitForFirstControlPlaneMachine(ctx, g, c)
	waitForKubeadmInitBootstrapData(ctx, g, c, machine)
	waitForMachineProvisionedAndBootstrapped(ctx, g, c, machine)
	waitForNodeLinkedAndControlPlaneHealthy(ctx, g, c, machine)
	expectPrintedKubeconfigCommandListsTheNode(ctx, g, r, dir)

	r.interrupt(t, g)
}

// expectThreeManagersRunAsChildren: Cluster API core, kubeadm bootstrap and
// kubeadm control plane each run as a child of dev.
func expectThreeManagersRunAsChildren(g Gomega, r *running) {
	managers := 0
	for _, pid := range descendants(r.cmd.Process.Pid) {
		if processName(pid) == "manager" {
			managers++
		}
	}
	g.Expect(managers).To(Equal(3), "Cluster API core, kubeadm bootstrap and kubeadm control plane each run as a child")
}

// expectKubeadmCRDsConvertThroughTheirManager: the kubeadm CRDs convert
// through their manager, as core's do.
func expectKubeadmCRDsConvertThroughTheirManager(ctx context.Context, g Gomega, c client.Client) {
	for _, name := range []string{"kubeadmconfigs.bootstrap.cluster.x-k8s.io", "kubeadmcontrolplanes.controlplane.cluster.x-k8s.io"} {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		g.Expect(c.Get(ctx, client.ObjectKey{Name: name}, crd)).To(Succeed())
		g.Expect(crd.Spec.Conversion.Strategy).To(Equal(apiextensionsv1.WebhookConverter), name)
		g.Expect(*crd.Spec.Conversion.Webhook.ClientConfig.URL).To(HavePrefix("https://127.0.0.1:"), name)
	}
}

// expectBootstrapWebhookRefusesWhatOnlyItChecks: the bootstrap provider's
// validating webhook answers.
func expectBootstrapWebhookRefusesWhatOnlyItChecks(ctx context.Context, g Gomega, c client.Client) {
	bad := &bootstrapv1.KubeadmConfig{
		ObjectMeta: metav1.ObjectMeta{Name: "bad", Namespace: "default"},
		Spec: bootstrapv1.KubeadmConfigSpec{Files: []bootstrapv1.File{{
			Path: "/etc/both", Content: "inline",
			ContentFrom: bootstrapv1.FileSource{Secret: bootstrapv1.SecretFileSource{Name: "s", Key: "k"}},
		}}},
	}
	g.Expect(c.Create(ctx, bad)).To(MatchError(ContainSubstring(
		`admission webhook "validation.kubeadmconfig.bootstrap.cluster.x-k8s.io" denied the request`)))
}

// expectClusterctlInventoryAndLabels: clusterctl's inventory records what
// dev runs, as clusterctl init would have, and every CRD carries
// clusterctl's labels: clusterctl and Cluster API's e2e framework find
// providers and kinds by them.
func expectClusterctlInventoryAndLabels(ctx context.Context, g Gomega, c client.Client) {
	providers := &unstructured.UnstructuredList{}
	providers.SetGroupVersionKind(schema.GroupVersionKind{Group: "clusterctl.cluster.x-k8s.io", Version: "v1alpha3", Kind: "ProviderList"})
	g.Expect(c.List(ctx, providers)).To(Succeed())
	var recorded []string
	for _, p := range providers.Items {
		version, _, _ := unstructured.NestedString(p.Object, "version")
		recorded = append(recorded, p.GetNamespace()+"/"+p.GetName()+"@"+version)
	}
	g.Expect(recorded).To(ConsistOf(
		"capi-system/cluster-api@v1.14.2",
		"capi-kubeadm-bootstrap-system/bootstrap-kubeadm@v1.14.2",
		"capi-kubeadm-control-plane-system/control-plane-kubeadm@v1.14.2",
		"capi-monolith-infrastructure/infrastructure-monolith@v0.1.0",
		"capi-monolith-ipam/ipam-monolith@v0.1.0",
		"capi-monolith-runtime-extension/runtime-extension-monolith@v0.1.0",
	))
	for name, provider := range map[string]string{
		"clusters.cluster.x-k8s.io":                            "cluster-api",
		"kubeadmconfigs.bootstrap.cluster.x-k8s.io":            "bootstrap-kubeadm",
		"monolithmachines.infrastructure.cluster.x-k8s.io":     "infrastructure-monolith",
		"monolithmachinepools.infrastructure.cluster.x-k8s.io": "infrastructure-monolith",
		"monolithippools.ipam.cluster.x-k8s.io":                "ipam-monolith",
	} {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		g.Expect(c.Get(ctx, client.ObjectKey{Name: name}, crd)).To(Succeed())
		g.Expect(crd.Labels).To(HaveKeyWithValue("clusterctl.cluster.x-k8s.io", ""), name)
		g.Expect(crd.Labels).To(HaveKeyWithValue("cluster.x-k8s.io/provider", provider), name)
	}
}

// createKubeadmClusterDefaulted applies kubeadmCluster; the control plane's
// defaulting webhook completes the KubeadmControlPlane.
func createKubeadmClusterDefaulted(ctx context.Context, g Gomega, c client.Client) {
	for _, obj := range decodeAll(g, kubeadmCluster) {
		g.Expect(c.Create(ctx, obj)).To(Succeed(), "%s %s", obj.GetKind(), obj.GetName())
	}
	kcp := &controlplanev1.KubeadmControlPlane{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "kcp"}, kcp)).To(Succeed())
	g.Expect(kcp.Spec.Version).To(Equal("v1.36.3"), "the control plane's defaulting webhook")
	g.Expect(kcp.Spec.Replicas).To(HaveValue(BeEquivalentTo(1)))
}

// waitForFirstControlPlaneMachine: KCP makes the first control plane
// Machine with a KubeadmConfig of its own.
func waitForFirstControlPlaneMachine(ctx context.Context, g Gomega, c client.Client) *clusterv1.Machine {
	machine := &clusterv1.Machine{}
	g.Eventually(func() error {
		list := &clusterv1.MachineList{}
		if err := c.List(ctx, list, client.InNamespace("default"), client.MatchingLabels{clusterv1.MachineControlPlaneNameLabel: "kcp"}); err != nil {
			return err
		}
		if len(list.Items) == 0 {
			return fmt.Errorf("no control plane Machine yet")
		}
		*machine = list.Items[0]
		return nil
	}).WithTimeout(provisionTimeout).Should(Succeed(), dump(ctx, c))
	g.Expect(machine.Spec.Bootstrap.ConfigRef.Kind).To(Equal("KubeadmConfig"))
	g.Expect(machine.Spec.InfrastructureRef.Kind).To(Equal("MonolithMachine"))
	g.Expect(machine.Spec.Version).To(Equal("v1.36.3"))
	return machine
}

// waitForKubeadmInitBootstrapData: the bootstrap provider writes kubeadm's
// cloud-init for `kubeadm init`, and core hands it to the Machine.
func waitForKubeadmInitBootstrapData(ctx context.Context, g Gomega, c client.Client, machine *clusterv1.Machine) {
	secretName := ""
	g.Eventually(func(g Gomega) {
		config := &bootstrapv1.KubeadmConfig{}
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "default", Name: machine.Spec.Bootstrap.ConfigRef.Name}, config)).To(Succeed())
		g.Expect(config.Status.DataSecretName).NotTo(BeEmpty(), "KubeadmConfig %s has no bootstrap data yet", config.Name)
		got := &clusterv1.Machine{}
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(machine), got)).To(Succeed())
		g.Expect(got.Spec.Bootstrap.DataSecretName).To(HaveValue(Equal(config.Status.DataSecretName)))
		secretName = config.Status.DataSecretName
	}).WithTimeout(provisionTimeout).Should(Succeed(), dump(ctx, c))
	secret := &corev1.Secret{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "default", Name: secretName}, secret)).To(Succeed())
	g.Expect(string(secret.Data["format"])).To(Equal("cloud-config"))
	g.Expect(string(secret.Data["value"])).To(And(ContainSubstring("#cloud-config"), ContainSubstring("kubeadm init")))
}

// waitForMachineProvisionedAndBootstrapped: our inMemory backend takes that
// data: the node is provisioned and the bootstrap ran (simulated), and core
// sees the infrastructure.
func waitForMachineProvisionedAndBootstrapped(ctx context.Context, g Gomega, c client.Client, machine *clusterv1.Machine) {
	g.Eventually(func(g Gomega) {
		mm := &infrav1.MonolithMachine{}
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "default", Name: machine.Spec.InfrastructureRef.Name}, mm)).To(Succeed())
		g.Expect(mm.Spec.ProviderID).To(HavePrefix("inmemory://"))
		g.Expect(mm.Status.Initialization.Provisioned).To(HaveValue(BeTrue()))
		g.Expect(conditions.IsTrue(mm, infrav1.BootstrapExecSucceededCondition)).To(BeTrue(), "bootstrap: %v", conditions.Get(mm, infrav1.BootstrapExecSucceededCondition))
		got := &clusterv1.Machine{}
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(machine), got)).To(Succeed())
		g.Expect(got.Spec.ProviderID).To(Equal(mm.Spec.ProviderID))
		g.Expect(got.Status.Initialization.InfrastructureProvisioned).To(HaveValue(BeTrue()))
	}).WithTimeout(provisionTimeout).Should(Succeed(), dump(ctx, c))
}

// waitForNodeLinkedAndControlPlaneHealthy: the node registers in the
// cluster's workload API as kubeadm init would make it: core links the
// Machine to its Node, and the control plane provider finds its static Pods
// and etcd member healthy.
func waitForNodeLinkedAndControlPlaneHealthy(ctx context.Context, g Gomega, c client.Client, machine *clusterv1.Machine) {
	g.Eventually(func(g Gomega) {
		got := &clusterv1.Machine{}
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(machine), got)).To(Succeed())
		g.Expect(got.Status.NodeRef.IsDefined()).To(BeTrue(), "Machine %s has no nodeRef", got.Name)
		g.Expect(got.Status.Phase).To(Equal(string(clusterv1.MachinePhaseRunning)))
		kcp := &controlplanev1.KubeadmControlPlane{}
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "kcp"}, kcp)).To(Succeed())
		g.Expect(conditions.IsTrue(kcp, controlplanev1.KubeadmControlPlaneAvailableCondition)).To(BeTrue(), "KCP Available: %v", conditions.Get(kcp, controlplanev1.KubeadmControlPlaneAvailableCondition))
		g.Expect(conditions.IsTrue(kcp, controlplanev1.KubeadmControlPlaneEtcdClusterHealthyCondition)).To(BeTrue(), "KCP EtcdClusterHealthy: %v", conditions.Get(kcp, controlplanev1.KubeadmControlPlaneEtcdClusterHealthyCondition))
		cluster := &clusterv1.Cluster{}
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "kcp"}, cluster)).To(Succeed())
		g.Expect(cluster.Status.Initialization.ControlPlaneInitialized).To(HaveValue(BeTrue()))
	}).WithTimeout(provisionTimeout).Should(Succeed(), dump(ctx, c))
}

// expectPrintedKubeconfigCommandListsTheNode: dev says how to reach the
// cluster, and that works as printed: the pinned clusterctl writes the
// kubeconfig, the real kubectl lists the node Ready, from the host, with no
// port-forward.
func expectPrintedKubeconfigCommandListsTheNode(ctx context.Context, g Gomega, r *running, dir string) {
	g.Eventually(r.stderr.String).WithTimeout(provisionTimeout).Should(
		MatchRegexp(`Cluster default/kcp is up, its API server on https://127\.0\.0\.1:2\d{4}:\n  clusterctl get kubeconfig kcp -n default > kcp\.kubeconfig && kubectl --kubeconfig kcp\.kubeconfig get nodes`))
	clusterctl := os.Getenv("CLUSTERCTL")
	g.Expect(clusterctl).NotTo(BeEmpty(), "CLUSTERCTL names the clusterctl `make clusterctl` built (make test sets it)")
	out, err := exec.CommandContext(ctx, clusterctl, "get", "kubeconfig", "kcp", "-n", "default", "--kubeconfig", r.kubeconfig).Output()
	g.Expect(err).NotTo(HaveOccurred(), "clusterctl get kubeconfig: %s", stderrOf(err))
	workloadKubeconfig := filepath.Join(dir, "kcp.kubeconfig")
	g.Expect(os.WriteFile(workloadKubeconfig, out, 0o600)).To(Succeed())
	g.Eventually(func(g Gomega) {
		out, err := exec.CommandContext(ctx, "kubectl", "--kubeconfig", workloadKubeconfig, "get", "nodes", "--no-headers").Output()
		g.Expect(err).NotTo(HaveOccurred(), "kubectl get nodes: %s", stderrOf(err))
		g.Expect(string(out)).To(MatchRegexp(`(?m)^kcp-\S+\s+Ready\s+control-plane\s+\S+\s+v1\.36\.3$`))
	}).WithTimeout(provisionTimeout).Should(Succeed())
}

// stderrOf is what a failed command printed on stderr.
func stderrOf(err error) string {
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return string(exit.Stderr)
	}
	return ""
}

// decodeAll reads a multi-document YAML into objects to create.
func decodeAll(g Gomega, manifests string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	decoder := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(manifests), 4096)
	for {
		obj := &unstructured.Unstructured{}
		if err := decoder.Decode(&obj.Object); err != nil {
			g.Expect(err).To(MatchError(io.EOF))
			return out
		}
		if len(obj.Object) > 0 {
			out = append(out, obj)
		}
	}
}

// dump describes the objects of the kubeadm flow (name, conditions) in the
// default namespace when a wait fails.
func dump(ctx context.Context, c client.Client) func() string {
	return dumpIn(ctx, c, "default")
}

// dumpIn is dump for the objects of namespace.
func dumpIn(ctx context.Context, c client.Client, namespace string) func() string {
	return func() string {
		var b strings.Builder
		for _, gvk := range []schema.GroupVersionKind{
			clusterv1.GroupVersion.WithKind("Cluster"), controlplanev1.GroupVersion.WithKind("KubeadmControlPlane"),
			clusterv1.GroupVersion.WithKind("Machine"), bootstrapv1.GroupVersion.WithKind("KubeadmConfig"),
			infrav1.GroupVersion.WithKind("MonolithMachine"),
		} {
			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
			if err := c.List(ctx, list, client.InNamespace(namespace)); err != nil {
				fmt.Fprintf(&b, "%s: %v\n", gvk.Kind, err)
				continue
			}
			for _, item := range list.Items {
				fmt.Fprintf(&b, "%s %s:\n", gvk.Kind, item.GetName())
				conds, _, _ := unstructured.NestedSlice(item.Object, "status", "conditions")
				for _, cond := range conds {
					m, _ := cond.(map[string]any)
					fmt.Fprintf(&b, "  %v=%v %v: %v\n", m["type"], m["status"], m["reason"], m["message"])
				}
			}
		}
		return b.String()
	}
}
