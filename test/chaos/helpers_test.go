package chaos

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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/cmd/clusterctl/client/yamlprocessor"
)

const (
	templatesDir      = "../../kustomize/templates"
	kubernetesVersion = "v1.36.3"

	// convergeTimeout bounds each wait for a cluster to converge or go:
	// after a kill the manager restarts and syncs its cache before it
	// reconciles again, and a kubeadm cluster's workers join only once its
	// control plane is initialized (about 35 s without faults on 2 loaded
	// cores, 95 s across kube-apiserver restarts).
	convergeTimeout = 5 * time.Minute
	poll            = 250 * time.Millisecond
)

var (
	monolithClusterGVK     = schema.GroupVersionKind{Group: "infrastructure.cluster.x-k8s.io", Version: "v1alpha1", Kind: "MonolithCluster"}
	monolithMachineGVK     = schema.GroupVersionKind{Group: "infrastructure.cluster.x-k8s.io", Version: "v1alpha1", Kind: "MonolithMachine"}
	monolithMachinePoolGVK = schema.GroupVersionKind{Group: "infrastructure.cluster.x-k8s.io", Version: "v1alpha1", Kind: "MonolithMachinePool"}
	monolithIPPoolGVK      = schema.GroupVersionKind{Group: "ipam.cluster.x-k8s.io", Version: "v1alpha1", Kind: "MonolithIPPool"}
	ipAddressGVK           = schema.GroupVersionKind{Group: "ipam.cluster.x-k8s.io", Version: "v1beta2", Kind: "IPAddress"}
	ipAddressClaimGVK      = schema.GroupVersionKind{Group: "ipam.cluster.x-k8s.io", Version: "v1beta2", Kind: "IPAddressClaim"}
	secretGVK              = corev1.SchemeGroupVersion.WithKind("Secret")
)

// clusterKinds are every namespaced kind core or our modules make or own
// for a cluster: after deletion none may be left, nor carry our finalizers.
var clusterKinds = []schema.GroupVersionKind{
	clusterv1.GroupVersion.WithKind("Cluster"),
	clusterv1.GroupVersion.WithKind("MachineDeployment"),
	clusterv1.GroupVersion.WithKind("MachineSet"),
	clusterv1.GroupVersion.WithKind("MachinePool"),
	clusterv1.GroupVersion.WithKind("Machine"),
	monolithClusterGVK, monolithMachineGVK, monolithMachinePoolGVK,
	ipAddressClaimGVK, ipAddressGVK,
}

// templateVars are the clusterctl variables every flavor gets. The
// simulated delays keep machines in flight for about as long as the kill
// delays, so that most kills land mid-provisioning.
func templateVars(namespace, name string) map[string]string {
	return map[string]string{
		"CLUSTER_NAME":                name,
		"NAMESPACE":                   namespace,
		"KUBERNETES_VERSION":          kubernetesVersion,
		"CONTROL_PLANE_MACHINE_COUNT": "1",
		"WORKER_MACHINE_COUNT":        "1",
		"MONOLITH_PROVISIONING_DELAY": "2s",
		"MONOLITH_BOOTSTRAP_DELAY":    "1s",
	}
}

// render processes kustomize/templates/<file> with clusterctl's template
// processor, as `clusterctl generate cluster --from` does, and splits it
// into objects.
func render(g Gomega, file string, vars map[string]string) []*unstructured.Unstructured {
	data, err := os.ReadFile(filepath.Join(templatesDir, file))
	g.Expect(err).NotTo(HaveOccurred())
	out, err := yamlprocessor.NewSimpleProcessor().Process(data, func(name string) (string, error) {
		if v, ok := vars[name]; ok {
			return v, nil
		}
		return "", fmt.Errorf("variable %s not set", name)
	})
	g.Expect(err).NotTo(HaveOccurred(), "rendering %s", file)

	var objs []*unstructured.Unstructured
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(out)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		g.Expect(err).NotTo(HaveOccurred())
		obj := &unstructured.Unstructured{}
		g.Expect(yaml.Unmarshal(doc, &obj.Object)).To(Succeed())
		if len(obj.Object) == 0 {
			continue
		}
		objs = append(objs, obj)
	}
	g.Expect(objs).NotTo(BeEmpty(), "%s renders no object", file)
	return objs
}

// apply creates the objects in order, as `kubectl apply -f` of a rendered
// template would; a field the CRD does not know is a template bug.
func apply(ctx context.Context, g Gomega, objs []*unstructured.Unstructured) {
	for _, obj := range objs {
		g.Expect(env.Client.Create(ctx, obj, client.FieldValidation("Strict"))).To(Succeed(), "creating %s %s", obj.GetKind(), obj.GetName())
	}
}

func list(ctx context.Context, gvk schema.GroupVersionKind, namespace string, opts ...client.ListOption) ([]unstructured.Unstructured, error) {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if namespace != "" {
		opts = append(opts, client.InNamespace(namespace))
	}
	if err := env.Client.List(ctx, l, opts...); err != nil {
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

// capiAlive stops an Eventually at once when one of Cluster API's
// managers (core, kubeadm bootstrap, kubeadm control plane) died: no
// cluster converges without them, and waiting out the bound says nothing.
func capiAlive() error {
	for _, p := range capi {
		select {
		case <-p.Exited():
			return StopTrying(p.Manager().Title + " exited").Wrap(fmt.Errorf("exit: %w", p.Err()))
		default:
		}
	}
	return nil
}

// pausedCondition reports whether the object's Paused condition is True.
func pausedCondition(o unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if ok && m["type"] == "Paused" && m["status"] == string(metav1.ConditionTrue) {
			return true
		}
	}
	return false
}

func patchCluster(ctx context.Context, g Gomega, namespace, name string, change func(*clusterv1.Cluster)) {
	c := &clusterv1.Cluster{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, c)).To(Succeed())
	base := c.DeepCopy()
	change(c)
	g.Expect(env.Client.Patch(ctx, c, client.MergeFrom(base))).To(Succeed())
}

func scaleMachineDeployment(ctx context.Context, g Gomega, namespace, name string, replicas int32) {
	md := &clusterv1.MachineDeployment{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, md)).To(Succeed())
	base := md.DeepCopy()
	md.Spec.Replicas = &replicas
	g.Expect(env.Client.Patch(ctx, md, client.MergeFrom(base))).To(Succeed())
}

func scaleMachinePool(ctx context.Context, g Gomega, namespace, name string, replicas int32) {
	mp := &clusterv1.MachinePool{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, mp)).To(Succeed())
	base := mp.DeepCopy()
	mp.Spec.Replicas = &replicas
	g.Expect(env.Client.Patch(ctx, mp, client.MergeFrom(base))).To(Succeed())
}
