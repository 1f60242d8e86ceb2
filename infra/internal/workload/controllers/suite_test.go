package controllers

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/kubeadm"
	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
)

const (
	wait     = 10 * time.Second
	podCIDR  = "192.168.0.0/16"
	svcCIDR  = "10.128.0.0/12"
	version  = "v1.36.3"
	testNS   = metav1.NamespaceDefault
	interval = 5 * time.Millisecond
)

// env is one workload cluster's store with its controllers running, and
// Nodes registered as kubeadm registers them.
type env struct {
	t *testing.T
	g *WithT
	s *store.Store
	c *Cluster
	// nodes counts the Nodes registered, for their addresses.
	nodes int
}

func newEnv(t *testing.T, opts Options) *env {
	t.Helper()
	m := New(opts)
	t.Cleanup(m.Shutdown)
	s := store.New(store.Options{})
	t.Cleanup(s.Close)
	c := m.Add(t.Name(), s)
	t.Cleanup(c.Stop)
	return &env{t: t, g: NewWithT(t), s: s, c: c}
}

var testCluster = kubeadm.Cluster{Name: "c1", ControlPlaneEndpoint: "127.0.0.1:6443", KubernetesVersion: version, PodSubnet: podCIDR, ServiceSubnet: svcCIDR}

// node registers a Node as kubeadm does (a control-plane one makes the
// cluster's kubeadm objects, CoreDNS and kube-proxy included).
func (e *env) node(name string, controlPlane bool, lbls map[string]string, taints *[]corev1.Taint) {
	e.t.Helper()
	e.nodes++
	err := kubeadm.Ensure(context.Background(), e.s, testCluster, kubeadm.Node{
		Name: name, ProviderID: "inmemory://" + name, KubeletVersion: version, ControlPlane: controlPlane,
		Labels: lbls, Taints: taints,
		Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("10.0.0.%d", 10+e.nodes)}},
	})
	e.g.Expect(err).NotTo(HaveOccurred())
}

// workers registers worker Nodes without taints.
func (e *env) workers(names ...string) {
	for _, n := range names {
		e.node(n, false, nil, &[]corev1.Taint{})
	}
}

func (e *env) create(res store.Resource, obj runtime.Object) *unstructured.Unstructured {
	e.t.Helper()
	u, err := toUnstructured(obj)
	e.g.Expect(err).NotTo(HaveOccurred())
	got, err := e.s.Create(res, u)
	e.g.Expect(err).NotTo(HaveOccurred())
	return got
}

// update changes the stored object with fn, retrying conflicts.
func update[T any](e *env, res store.Resource, namespace, name string, fn func(*T)) {
	e.t.Helper()
	e.g.Eventually(func() error {
		u, err := e.s.Get(res, namespace, name)
		if err != nil {
			return err
		}
		obj, err := typed[T](u)
		if err != nil {
			return err
		}
		fn(obj)
		out, err := toUnstructured(obj)
		if err != nil {
			return err
		}
		_, err = e.s.Update(res, out)
		return err
	}, wait, interval).Should(Succeed())
}

func get[T any](e *env, res store.Resource, namespace, name string) func() (*T, error) {
	return func() (*T, error) {
		u, err := e.s.Get(res, namespace, name)
		if err != nil {
			return nil, err
		}
		return typed[T](u)
	}
}

// list returns the objects of res selected by sel.
func list[T any](e *env, res store.Resource, namespace string, sel map[string]string) func() ([]*T, error) {
	return func() ([]*T, error) {
		objs, _, err := e.s.List(res, namespace, store.ListOptions{LabelSelector: labels.SelectorFromSet(sel)})
		if err != nil {
			return nil, err
		}
		out := make([]*T, 0, len(objs))
		for _, o := range objs {
			t, err := typed[T](o)
			if err != nil {
				return nil, err
			}
			out = append(out, t)
		}
		return out, nil
	}
}

func runningReady(p *corev1.Pod) bool {
	ok, _ := podReady(p)
	return p.Status.Phase == corev1.PodRunning && ok
}

func podTemplate(app, image string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "main", Image: image, Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
		}}},
	}
}

var _ = ptr.To[int32]

type storageClass = storagev1.StorageClass

func resourceMust(q string) resource.Quantity { return resource.MustParse(q) }

func itoa(i int64) string { return strconv.FormatInt(i, 10) }

type appsv1Deployment = appsv1.Deployment
