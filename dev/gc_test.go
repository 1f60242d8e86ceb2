package dev_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/cmd/clusterctl/client/yamlprocessor"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/secret"
)

// gcTimeout bounds the garbage collector's and the namespace controller's
// work: each runs as soon as the owner (or the namespace) is gone.
const gcTimeout = time.Minute

// defaultFlavor renders kustomize/templates/cluster-template.yaml as
// `clusterctl generate cluster --from` does (clusterctl's own processor): one
// control plane machine, no workers, short simulated delays.
func defaultFlavor(g Gomega, namespace, name string) []*unstructured.Unstructured {
	data, err := os.ReadFile(filepath.Join("..", "kustomize", "templates", "cluster-template.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	vars := map[string]string{
		"CLUSTER_NAME": name, "NAMESPACE": namespace, "KUBERNETES_VERSION": "v1.36.3",
		"CONTROL_PLANE_MACHINE_COUNT": "1", "WORKER_MACHINE_COUNT": "0",
		"MONOLITH_PROVISIONING_DELAY": "500ms", "MONOLITH_BOOTSTRAP_DELAY": "500ms",
	}
	out, err := yamlprocessor.NewSimpleProcessor().Process(data, func(v string) (string, error) {
		if value, ok := vars[v]; ok {
			return value, nil
		}
		return "", fmt.Errorf("variable %s not set", v)
	})
	g.Expect(err).NotTo(HaveOccurred())
	return decodeAll(g, string(out))
}

// expectAvailable waits until the cluster's KubeadmControlPlane is
// Available and every Machine of the cluster Running, and returns the
// Cluster.
func expectAvailable(ctx context.Context, g Gomega, c client.Client, namespace, name string) *clusterv1.Cluster {
	cluster := &clusterv1.Cluster{}
	g.Eventually(func(g Gomega) {
		kcp := &controlplanev1.KubeadmControlPlane{}
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name + "-control-plane"}, kcp)).To(Succeed())
		g.Expect(conditions.IsTrue(kcp, controlplanev1.KubeadmControlPlaneAvailableCondition)).To(BeTrue(), "KCP Available: %v", conditions.Get(kcp, controlplanev1.KubeadmControlPlaneAvailableCondition))
		machines := &clusterv1.MachineList{}
		g.Expect(c.List(ctx, machines, client.InNamespace(namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: name})).To(Succeed())
		g.Expect(machines.Items).To(HaveLen(1))
		g.Expect(machines.Items[0].Status.Phase).To(Equal(string(clusterv1.MachinePhaseRunning)), "Machine %s", machines.Items[0].Name)
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, cluster)).To(Succeed())
		g.Expect(cluster.Spec.ControlPlaneEndpoint.IsValid()).To(BeTrue())
	}).WithTimeout(2*provisionTimeout).Should(Succeed(), dumpIn(ctx, c, namespace))
	return cluster
}

// secretNames lists the Secrets of a namespace by name.
func secretNames(ctx context.Context, g Gomega, c client.Client, namespace string) []string {
	list := &corev1.SecretList{}
	g.Expect(c.List(ctx, list, client.InNamespace(namespace))).To(Succeed())
	var names []string
	for _, s := range list.Items {
		names = append(names, s.Name)
	}
	slices.Sort(names)
	return names
}

// dev runs kube-controller-manager's garbage collector and namespace
// controller: a deleted default-flavor Cluster takes the Secrets its
// KubeadmControlPlane and KubeadmConfigs own with it (owner references), so
// a Cluster of the same name made again gets a kubeconfig for its own,
// new, workload API and becomes Available; a deleted namespace goes away.
func TestDeletedClustersSecretsAreCollectedAndTheNameCanBeReused(t *testing.T) {
	g := NewWithT(t)
	r := startBinary(t, g, t.TempDir())
	ctx := t.Context()
	c := r.client
	const ns, name = "gc", "gc"
	g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())

	for _, obj := range defaultFlavor(g, ns, name) {
		g.Expect(c.Create(ctx, obj)).To(Succeed(), "%s %s", obj.GetKind(), obj.GetName())
	}
	first := expectAvailable(ctx, g, c, ns, name)
	configs := &bootstrapv1.KubeadmConfigList{}
	g.Expect(c.List(ctx, configs, client.InNamespace(ns))).To(Succeed())
	g.Expect(configs.Items).To(HaveLen(1))
	bootstrapData := configs.Items[0].Status.DataSecretName
	g.Expect(bootstrapData).NotTo(BeEmpty())
	owned := []string{bootstrapData}
	for _, purpose := range []secret.Purpose{secret.ClusterCA, secret.EtcdCA, secret.ServiceAccount, secret.FrontProxyCA, secret.Kubeconfig} {
		owned = append(owned, secret.Name(name, purpose))
	}
	g.Expect(secretNames(ctx, g, c, ns)).To(ContainElements(owned))

	// Deleted, the Cluster's objects go (Cluster API deletes some), then
	// what they owned (the garbage collector): the Secrets, and the
	// templates and MachineDeployment the Cluster owns.
	g.Expect(c.Delete(ctx, first)).To(Succeed())
	g.Eventually(func() error {
		return c.Get(ctx, client.ObjectKeyFromObject(first), &clusterv1.Cluster{})
	}).WithTimeout(2*provisionTimeout).Should(Satisfy(apierrors.IsNotFound), dumpIn(ctx, c, ns))
	g.Eventually(func(g Gomega) []string { return secretNames(ctx, g, c, ns) }).WithTimeout(gcTimeout).
		ShouldNot(ContainElement(BeElementOf(owned)), "the Secrets of the deleted cluster are collected")
	for _, obj := range defaultFlavor(g, ns, name) {
		g.Eventually(func() error {
			return c.Get(ctx, client.ObjectKeyFromObject(obj), obj.DeepCopy())
		}).WithTimeout(gcTimeout).Should(Satisfy(apierrors.IsNotFound), "%s %s is collected", obj.GetKind(), obj.GetName())
	}

	// The same name again: a new workload API, and a kubeconfig for it.
	for _, obj := range defaultFlavor(g, ns, name) {
		g.Expect(c.Create(ctx, obj)).To(Succeed(), "%s %s", obj.GetKind(), obj.GetName())
	}
	second := expectAvailable(ctx, g, c, ns, name)
	g.Expect(second.UID).NotTo(Equal(first.UID))
	kubeconfigSecret := &corev1.Secret{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: secret.Name(name, secret.Kubeconfig)}, kubeconfigSecret)).To(Succeed())
	workload, err := clientcmd.Load(kubeconfigSecret.Data[secret.KubeconfigDataName])
	g.Expect(err).NotTo(HaveOccurred())
	for _, cluster := range workload.Clusters {
		g.Expect(cluster.Server).To(Equal(fmt.Sprintf("https://%s:%d", second.Spec.ControlPlaneEndpoint.Host, second.Spec.ControlPlaneEndpoint.Port)))
	}

	// The namespace, cluster and all: the namespace controller empties it
	// (Cluster API deleting the cluster on the way) and removes it.
	g.Expect(c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	g.Eventually(func() error {
		return c.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})
	}).WithTimeout(2*provisionTimeout).Should(Satisfy(apierrors.IsNotFound), dumpIn(ctx, c, ns))

	r.interrupt(t, g)
}

// Envtest assets of the user's (KUBEBUILDER_ASSETS, e.g. setup-envtest's)
// without kube-controller-manager: dev starts all the same, without it, and
// warns once that nothing is garbage-collected.
func TestAssetsWithoutAControllerManagerStartWithAWarning(t *testing.T) {
	g := NewWithT(t)
	given := os.Getenv("KUBEBUILDER_ASSETS")
	g.Expect(given).NotTo(BeEmpty(), "KUBEBUILDER_ASSETS names the envtest assets (make test sets it)")
	assets := t.TempDir()
	for _, name := range []string{"etcd", "kube-apiserver"} {
		g.Expect(os.Symlink(filepath.Join(given, name), filepath.Join(assets, name))).To(Succeed())
	}
	t.Setenv("KUBEBUILDER_ASSETS", assets)

	r := startBinary(t, g, t.TempDir())
	warning := "KUBEBUILDER_ASSETS (" + assets + ") has no kube-controller-manager, so no garbage collector runs"
	g.Eventually(r.stderr.String).WithTimeout(5 * time.Second).Should(ContainSubstring("Ready in"))
	g.Expect(strings.Count(r.stderr.String(), warning)).To(Equal(1), r.stderr.String())
	g.Expect(r.stderr.String()).To(ContainSubstring("the dependents of deleted objects"))
	for _, pid := range descendants(r.cmd.Process.Pid) {
		g.Expect(processName(pid)).NotTo(Equal(kubeControllerManagerComm))
	}
	r.interrupt(t, g)
}
