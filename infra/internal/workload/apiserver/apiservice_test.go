package apiserver

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
)

// APIServices are created, updated and deleted as kube-apiserver v1.36.3
// (envtest's) does them, and get the Available condition its aggregator
// gives them: True for a local one, False with the same reason for one
// whose Service is missing, or has no EndpointSlices.
func TestAPIServicesAreWrittenAndGetTheAggregatorsAvailability(t *testing.T) {
	g := NewWithT(t)
	managementOpenAPI(t) // starts the envtest kube-apiserver
	ts := startServer(t, store.Options{}, "c1")
	ctx := context.Background()
	gvr := schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}
	apiService := func(name, group, service string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
			"metadata": map[string]any{"name": name},
			"spec":     map[string]any{"group": group, "version": "v1", "groupPriorityMinimum": int64(100), "versionPriority": int64(10)},
		}}
		if service != "" {
			u.Object["spec"].(map[string]any)["service"] = map[string]any{"namespace": "default", "name": service, "port": int64(443)}
			u.Object["spec"].(map[string]any)["insecureSkipTLSVerify"] = true
		}
		return u
	}
	available := func(dc dynamic.Interface, name string) func() []string {
		return func() []string {
			u, err := dc.Resource(gvr).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return []string{err.Error()}
			}
			conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
			for _, c := range conds {
				c := c.(map[string]any)
				if c["type"] == "Available" {
					return []string{c["status"].(string), c["reason"].(string)}
				}
			}
			return nil
		}
	}
	cases := []struct {
		name, group, service string
		want                 []string
	}{
		{"v1.local.example.com", "local.example.com", "", []string{"True", "Local"}},
		{"v1.missing.example.com", "missing.example.com", "missing", []string{"False", "ServiceNotFound"}},
		{"v1.noendpoints.example.com", "noendpoints.example.com", "noendpoints", []string{"False", "EndpointsNotFound"}},
	}
	for _, cfg := range []struct {
		name string
		dc   dynamic.Interface
		cs   kubernetes.Interface
	}{
		{"kube-apiserver", dynamicClient(t, management.env.Config), kubernetes.NewForConfigOrDie(management.env.Config)},
		{"workload API", dynamicClient(t, ts.restConfig(t, "c1")), clientset(t, ts, "c1")},
	} {
		_, err := cfg.cs.CoreV1().Services("default").Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "noendpoints"},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 443}}},
		}, metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred(), cfg.name)
		for _, c := range cases {
			_, err := cfg.dc.Resource(gvr).Create(ctx, apiService(c.name, c.group, c.service), metav1.CreateOptions{})
			g.Expect(err).NotTo(HaveOccurred(), cfg.name)
			t.Cleanup(func() { _ = cfg.dc.Resource(gvr).Delete(ctx, c.name, metav1.DeleteOptions{}) })
			g.Eventually(available(cfg.dc, c.name), 20*time.Second).Should(Equal(c.want), cfg.name+" "+c.name)
		}
		u, err := cfg.dc.Resource(gvr).Patch(ctx, "v1.local.example.com", types.MergePatchType,
			[]byte(`{"spec":{"versionPriority":20}}`), metav1.PatchOptions{})
		g.Expect(err).NotTo(HaveOccurred(), cfg.name)
		g.Expect(u.Object["spec"].(map[string]any)["versionPriority"]).To(BeEquivalentTo(20))
		g.Expect(cfg.dc.Resource(gvr).Delete(ctx, "v1.missing.example.com", metav1.DeleteOptions{})).To(Succeed(), cfg.name)
		g.Eventually(func() bool {
			_, err := cfg.dc.Resource(gvr).Get(ctx, "v1.missing.example.com", metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}, 10*time.Second).Should(BeTrue(), cfg.name)
	}
}
