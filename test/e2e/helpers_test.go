package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/cmd/clusterctl/client/yamlprocessor"
	"sigs.k8s.io/cluster-api/util/conditions"
)

const (
	templatesDir      = "../../kustomize/templates"
	kubernetesVersion = "v1.36.3"

	// Bounds of the waits. The inMemory backend provisions within seconds;
	// Cluster API core's MachineSet controller creates machines one
	// reconcile at a time.
	provisionTimeout = 90 * time.Second
	deleteTimeout    = 90 * time.Second
	poll             = 250 * time.Millisecond
)

var (
	monolithClusterGVK     = schema.GroupVersionKind{Group: "infrastructure.cluster.x-k8s.io", Version: "v1alpha1", Kind: "MonolithCluster"}
	monolithMachineGVK     = schema.GroupVersionKind{Group: "infrastructure.cluster.x-k8s.io", Version: "v1alpha1", Kind: "MonolithMachine"}
	monolithIPPoolGVK      = schema.GroupVersionKind{Group: "ipam.cluster.x-k8s.io", Version: "v1alpha1", Kind: "MonolithIPPool"}
	ipAddressGVK           = schema.GroupVersionKind{Group: "ipam.cluster.x-k8s.io", Version: "v1beta2", Kind: "IPAddress"}
	ipAddressClaimGVK      = schema.GroupVersionKind{Group: "ipam.cluster.x-k8s.io", Version: "v1beta2", Kind: "IPAddressClaim"}
	machineGVK             = clusterv1.GroupVersion.WithKind("Machine")
	machineSetGVK          = clusterv1.GroupVersion.WithKind("MachineSet")
	machineDeploymentGV    = clusterv1.GroupVersion.WithKind("MachineDeployment")
	kubeadmControlPlaneGVK = schema.GroupVersionKind{Group: "controlplane.cluster.x-k8s.io", Version: "v1beta2", Kind: "KubeadmControlPlane"}
	kubeadmConfigGVK       = schema.GroupVersionKind{Group: "bootstrap.cluster.x-k8s.io", Version: "v1beta2", Kind: "KubeadmConfig"}
)

// templateVars are the clusterctl variables every flavor gets; a spec adds
// its own. Short simulated delays keep the suite fast.
func templateVars(namespace, name string) map[string]string {
	return map[string]string{
		"CLUSTER_NAME":                name,
		"NAMESPACE":                   namespace,
		"KUBERNETES_VERSION":          kubernetesVersion,
		"CONTROL_PLANE_MACHINE_COUNT": "1",
		"WORKER_MACHINE_COUNT":        "1",
		"MONOLITH_PROVISIONING_DELAY": "500ms",
		"MONOLITH_BOOTSTRAP_DELAY":    "500ms",
	}
}

// render processes kustomize/templates/<file> with clusterctl's own template
// processor, as `clusterctl generate cluster --from` does, and splits it
// into objects.
func render(file string, vars map[string]string) []*unstructured.Unstructured {
	data, err := os.ReadFile(filepath.Join(templatesDir, file))
	Expect(err).NotTo(HaveOccurred())
	out, err := yamlprocessor.NewSimpleProcessor().Process(data, func(name string) (string, error) {
		if v, ok := vars[name]; ok {
			return v, nil
		}
		return "", fmt.Errorf("variable %s not set", name)
	})
	Expect(err).NotTo(HaveOccurred(), "rendering %s", file)

	var objs []*unstructured.Unstructured
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(out)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		Expect(err).NotTo(HaveOccurred())
		obj := &unstructured.Unstructured{}
		Expect(yaml.Unmarshal(doc, &obj.Object)).To(Succeed())
		if len(obj.Object) == 0 {
			continue
		}
		objs = append(objs, obj)
	}
	Expect(objs).NotTo(BeEmpty(), "%s renders no object", file)
	return objs
}

// apply creates the objects in order, as `kubectl apply -f` of a rendered
// template would.
func apply(ctx context.Context, objs []*unstructured.Unstructured) {
	for _, obj := range objs {
		// Strict: a field the CRD does not know is a template bug, not something
		// to prune silently.
		Expect(env.Client.Create(ctx, obj, client.FieldValidation("Strict"))).To(Succeed(), "creating %s %s", obj.GetKind(), obj.GetName())
	}
}

func createNamespace(ctx context.Context, prefix string) string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	Expect(env.Client.Create(ctx, ns)).To(Succeed())
	return ns.Name
}

func list(ctx context.Context, gvk schema.GroupVersionKind, namespace string, opts ...client.ListOption) ([]unstructured.Unstructured, error) {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := env.Client.List(ctx, l, append(opts, client.InNamespace(namespace))...); err != nil {
		return nil, err
	}
	return l.Items, nil
}

func get(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, error) {
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	err := env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, obj)
	return obj, err
}

// coreAlive stops an Eventually at once when Cluster API core died.
func coreAlive() error {
	select {
	case err := <-env.Failed():
		return StopTrying("the dev environment failed").Wrap(err)
	default:
		return nil
	}
}

// runningMachines returns the cluster's Machines once each has a
// providerID, is infrastructure-provisioned, has its Node (nodeRef, from
// the inMemory cluster's workload API) and is in the Running phase, with a
// provisioned MonolithMachine of the same provider ID.
func runningMachines(ctx context.Context, namespace, cluster string) ([]clusterv1.Machine, error) {
	return machinesIn(ctx, namespace, cluster, clusterv1.MachinePhaseRunning)
}

// provisionedMachines is runningMachines but for the Provisioned phase and
// no Node: as far as a Machine gets where no workload API answers (the
// docker spec's test node image runs no kubelet).
func provisionedMachines(ctx context.Context, namespace, cluster string) ([]clusterv1.Machine, error) {
	return machinesIn(ctx, namespace, cluster, clusterv1.MachinePhaseProvisioned)
}

func machinesIn(ctx context.Context, namespace, cluster string, phase clusterv1.MachinePhase) ([]clusterv1.Machine, error) {
	if err := coreAlive(); err != nil {
		return nil, err
	}
	machines := &clusterv1.MachineList{}
	if err := env.Client.List(ctx, machines, client.InNamespace(namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: cluster}); err != nil {
		return nil, err
	}
	for _, m := range machines.Items {
		if m.Spec.ProviderID == "" {
			return nil, fmt.Errorf("machine %s has no providerID yet", m.Name)
		}
		if m.Status.Initialization.InfrastructureProvisioned == nil || !*m.Status.Initialization.InfrastructureProvisioned {
			return nil, fmt.Errorf("machine %s: infrastructure not provisioned yet", m.Name)
		}
		if phase == clusterv1.MachinePhaseRunning && !m.Status.NodeRef.IsDefined() {
			return nil, fmt.Errorf("machine %s has no Node yet (phase %q)", m.Name, m.Status.Phase)
		}
		if m.Status.Phase != string(phase) {
			// A Machine being deleted says what it waits for (drain, volume
			// detach, its infrastructure, its Node).
			deleting := ""
			if c := conditions.Get(&m, clusterv1.MachineDeletingCondition); c != nil {
				deleting = fmt.Sprintf(" (Deleting %s: %s)", c.Reason, c.Message)
			}
			return nil, fmt.Errorf("machine %s is in phase %q, want %q%s", m.Name, m.Status.Phase, phase, deleting)
		}
		infra, err := get(ctx, monolithMachineGVK, namespace, m.Spec.InfrastructureRef.Name)
		if err != nil {
			return nil, err
		}
		if ok, _, _ := unstructured.NestedBool(infra.Object, "status", "initialization", "provisioned"); !ok {
			return nil, fmt.Errorf("MonolithMachine %s not provisioned yet", infra.GetName())
		}
		if id, _, _ := unstructured.NestedString(infra.Object, "spec", "providerID"); id != m.Spec.ProviderID {
			return nil, fmt.Errorf("MonolithMachine %s has providerID %q, its Machine %q", infra.GetName(), id, m.Spec.ProviderID)
		}
	}
	return machines.Items, nil
}

// expectMachines waits until the cluster has exactly n machines, all
// Running with their Node.
func expectMachines(ctx context.Context, namespace, cluster string, n int) []clusterv1.Machine {
	var got []clusterv1.Machine
	Eventually(func() ([]clusterv1.Machine, error) {
		var err error
		got, err = runningMachines(ctx, namespace, cluster)
		return got, err
	}).WithTimeout(provisionTimeout).WithPolling(poll).Should(HaveLen(n))
	return got
}

// expectProvisionedMachines waits until the cluster has exactly n
// machines, all provisioned (see provisionedMachines).
func expectProvisionedMachines(ctx context.Context, namespace, cluster string, n int) []clusterv1.Machine {
	var got []clusterv1.Machine
	Eventually(func() ([]clusterv1.Machine, error) {
		var err error
		got, err = provisionedMachines(ctx, namespace, cluster)
		return got, err
	}).WithTimeout(provisionTimeout).WithPolling(poll).Should(HaveLen(n))
	return got
}

// expectClusterProvisioned waits for the MonolithCluster to be provisioned
// and the Cluster to report its infrastructure ready.
func expectClusterProvisioned(ctx context.Context, namespace, name string) {
	Eventually(func(g Gomega) {
		g.Expect(coreAlive()).To(Succeed())
		infra, err := get(ctx, monolithClusterGVK, namespace, name)
		g.Expect(err).NotTo(HaveOccurred())
		provisioned, _, _ := unstructured.NestedBool(infra.Object, "status", "initialization", "provisioned")
		g.Expect(provisioned).To(BeTrue(), "MonolithCluster provisioned")
		host, _, _ := unstructured.NestedString(infra.Object, "spec", "controlPlaneEndpoint", "host")
		g.Expect(host).NotTo(BeEmpty(), "MonolithCluster control plane endpoint")

		cluster := &clusterv1.Cluster{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, cluster)).To(Succeed())
		g.Expect(cluster.Status.Initialization.InfrastructureProvisioned).To(HaveValue(BeTrue()))
		g.Expect(cluster.Status.Conditions).To(ContainElement(And(
			HaveField("Type", clusterv1.ClusterInfrastructureReadyCondition),
			HaveField("Status", metav1.ConditionTrue),
		)))
		g.Expect(cluster.Spec.ControlPlaneEndpoint.Host).To(Equal(host))
	}).WithTimeout(provisionTimeout).WithPolling(poll).Should(Succeed())
}

func scaleMachineDeployment(ctx context.Context, namespace, name string, replicas int32) {
	md := &clusterv1.MachineDeployment{}
	Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, md)).To(Succeed())
	base := md.DeepCopy()
	md.Spec.Replicas = &replicas
	Expect(env.Client.Patch(ctx, md, client.MergeFrom(base))).To(Succeed())
}

// deleteClusterAndWait deletes the Cluster and waits until it, and every
// object of it that our modules or core made, is gone.
func deleteClusterAndWait(ctx context.Context, namespace, name string) {
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	Expect(env.Client.Delete(ctx, cluster)).To(Succeed())
	Eventually(func() error {
		if err := coreAlive(); err != nil {
			return err
		}
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(cluster), cluster)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("cluster %s still exists", name)
	}).WithTimeout(deleteTimeout).WithPolling(poll).Should(Succeed())
	expectNothingLeft(ctx, namespace)
}

// expectNothingLeft waits until no object core or our modules make for a
// cluster is left in the namespace.
func expectNothingLeft(ctx context.Context, namespace string) {
	for _, gvk := range []schema.GroupVersionKind{kubeadmControlPlaneGVK, machineDeploymentGV, machineSetGVK, machineGVK, kubeadmConfigGVK, monolithMachineGVK, monolithClusterGVK, ipAddressClaimGVK, ipAddressGVK} {
		Eventually(func() ([]unstructured.Unstructured, error) {
			return list(ctx, gvk, namespace)
		}).WithTimeout(deleteTimeout).WithPolling(poll).Should(BeEmpty(), "%s left in %s", gvk.Kind, namespace)
	}
}
