package apiserver

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
)

// The Events of one version are the other's, field by field, as envtest's
// kube-apiserver v1.36.3 converts them; so are autoscaling/v1 and v2
// HorizontalPodAutoscalers, v2's other metrics kept in v1's annotations.
func TestOneStorageServesBothVersionsAsKubeAPIServer(t *testing.T) {
	g := NewWithT(t)
	managementOpenAPI(t) // starts the envtest kube-apiserver
	real, err := kubernetes.NewForConfig(management.env.Config)
	g.Expect(err).NotTo(HaveOccurred())
	ts := startServer(t, store.Options{}, "c1")
	ours := clientset(t, ts, "c1")
	ctx := context.Background()
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	micro := metav1.NewMicroTime(now.Time)

	type answers struct {
		asEvents *eventsv1.Event
		asCore   *corev1.Event
		v1       *autoscalingv1.HorizontalPodAutoscaler
		v2       *autoscalingv2.HorizontalPodAutoscaler
	}
	ask := func(cs kubernetes.Interface) answers {
		var a answers
		core := &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: "core.1", Namespace: "default"},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "p", UID: "u1", APIVersion: "v1"},
			Reason:         "Started", Message: "started the container", Type: corev1.EventTypeNormal,
			Source:         corev1.EventSource{Component: "kubelet", Host: "node-1"},
			FirstTimestamp: now, LastTimestamp: now, Count: 3,
		}
		_, err := cs.CoreV1().Events("default").Create(ctx, core, metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		a.asEvents, err = cs.EventsV1().Events("default").Get(ctx, "core.1", metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())

		ev := &eventsv1.Event{
			ObjectMeta: metav1.ObjectMeta{Name: "events.1", Namespace: "default"},
			EventTime:  micro, Series: &eventsv1.EventSeries{Count: 2, LastObservedTime: micro},
			ReportingController: "example.com/controller", ReportingInstance: "controller-1",
			Action: "Scaling", Reason: "Scaled", Type: corev1.EventTypeWarning, Note: "scaled up",
			Regarding: corev1.ObjectReference{Kind: "Deployment", Namespace: "default", Name: "d", APIVersion: "apps/v1"},
			Related:   &corev1.ObjectReference{Kind: "ReplicaSet", Namespace: "default", Name: "d-1", APIVersion: "apps/v1"},
		}
		_, err = cs.EventsV1().Events("default").Create(ctx, ev, metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		a.asCore, err = cs.CoreV1().Events("default").Get(ctx, "events.1", metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())

		v2 := &autoscalingv2.HorizontalPodAutoscaler{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
			Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
				ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
				MinReplicas:    ptr.To[int32](1), MaxReplicas: 5,
				Metrics: []autoscalingv2.MetricSpec{
					{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceCPU,
						Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](60)}}},
					{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceMemory,
						Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](70)}}},
				},
			},
		}
		_, err = cs.AutoscalingV2().HorizontalPodAutoscalers("default").Create(ctx, v2, metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		a.v1, err = cs.AutoscalingV1().HorizontalPodAutoscalers("default").Get(ctx, "web", metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())

		v1 := &autoscalingv1.HorizontalPodAutoscaler{
			ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: "default"},
			Spec: autoscalingv1.HorizontalPodAutoscalerSpec{
				ScaleTargetRef: autoscalingv1.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "api"},
				MinReplicas:    ptr.To[int32](2), MaxReplicas: 4, TargetCPUUtilizationPercentage: ptr.To[int32](50),
			},
		}
		_, err = cs.AutoscalingV1().HorizontalPodAutoscalers("default").Create(ctx, v1, metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		a.v2, err = cs.AutoscalingV2().HorizontalPodAutoscalers("default").Get(ctx, "api", metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		return a
	}
	want, got := ask(real), ask(ours)

	g.Expect(got.asEvents.Regarding).To(Equal(want.asEvents.Regarding))
	g.Expect(got.asEvents.Note).To(Equal(want.asEvents.Note))
	g.Expect(got.asEvents.Reason).To(Equal(want.asEvents.Reason))
	g.Expect(got.asEvents.Type).To(Equal(want.asEvents.Type))
	g.Expect(got.asEvents.DeprecatedSource).To(Equal(want.asEvents.DeprecatedSource))
	g.Expect(got.asEvents.DeprecatedFirstTimestamp.Equal(&want.asEvents.DeprecatedFirstTimestamp)).To(BeTrue())
	g.Expect(got.asEvents.DeprecatedLastTimestamp.Equal(&want.asEvents.DeprecatedLastTimestamp)).To(BeTrue())
	g.Expect(got.asEvents.DeprecatedCount).To(Equal(want.asEvents.DeprecatedCount))
	g.Expect(got.asEvents.Series).To(Equal(want.asEvents.Series))

	g.Expect(got.asCore.InvolvedObject).To(Equal(want.asCore.InvolvedObject))
	g.Expect(got.asCore.Related).To(Equal(want.asCore.Related))
	g.Expect(got.asCore.Message).To(Equal(want.asCore.Message))
	g.Expect(got.asCore.ReportingController).To(Equal(want.asCore.ReportingController))
	g.Expect(got.asCore.ReportingInstance).To(Equal(want.asCore.ReportingInstance))
	g.Expect(got.asCore.Action).To(Equal(want.asCore.Action))
	g.Expect(got.asCore.Reason).To(Equal(want.asCore.Reason))
	g.Expect(got.asCore.Type).To(Equal(want.asCore.Type))
	g.Expect(got.asCore.EventTime.Equal(&want.asCore.EventTime)).To(BeTrue())
	g.Expect(got.asCore.Series.Count).To(Equal(want.asCore.Series.Count))
	g.Expect(got.asCore.Count).To(Equal(want.asCore.Count))
	g.Expect(got.asCore.Source).To(Equal(want.asCore.Source))

	g.Expect(got.v1.Spec).To(Equal(want.v1.Spec))
	var wantMetrics, gotMetrics []autoscalingv1.MetricSpec
	g.Expect(json.Unmarshal([]byte(want.v1.Annotations[hpaMetricsAnnotation]), &wantMetrics)).To(Succeed())
	g.Expect(json.Unmarshal([]byte(got.v1.Annotations[hpaMetricsAnnotation]), &gotMetrics)).To(Succeed())
	g.Expect(gotMetrics).To(Equal(wantMetrics))
	g.Expect(got.v2.Spec.Metrics).To(Equal(want.v2.Spec.Metrics))
	g.Expect(got.v2.Spec.ScaleTargetRef).To(Equal(want.v2.Spec.ScaleTargetRef))
	g.Expect(got.v2.Annotations).To(Equal(want.v2.Annotations))
	t.Logf("kube-apiserver's v1 annotations: %v; ours: %v", want.v1.Annotations, got.v1.Annotations)
}

// One storage: an Event is listed, watched and deleted through either
// group, an update in one is read in the other, field selectors are each
// version's own, and an HPA updated through v1 keeps its v2 metrics.
func TestBothVersionsShareOneStorage(t *testing.T) {
	g := NewWithT(t)
	ts := startServer(t, store.Options{}, "c1")
	cs := clientset(t, ts, "c1")
	ctx := context.Background()

	w, err := cs.EventsV1().Events("default").Watch(ctx, metav1.ListOptions{FieldSelector: "regarding.name=p"})
	g.Expect(err).NotTo(HaveOccurred())
	defer w.Stop()
	_, err = cs.CoreV1().Events("default").Create(ctx, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "e"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "p"},
		Message:        "hello", Reason: "Pulled", Type: corev1.EventTypeNormal,
	}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	var e watch.Event
	g.Eventually(w.ResultChan(), 10*time.Second).Should(Receive(&e))
	g.Expect(e.Type).To(Equal(watch.Added))
	g.Expect(e.Object.(*eventsv1.Event).Note).To(Equal("hello"))

	list, err := cs.EventsV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "reportingController=,regarding.kind=Pod"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(list.Items).To(HaveLen(1))
	_, err = cs.EventsV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=p"})
	g.Expect(apierrors.IsBadRequest(err)).To(BeTrue(), "got %v", err)

	_, err = cs.EventsV1().Events("default").Patch(ctx, "e", types.MergePatchType, []byte(`{"note":"changed"}`), metav1.PatchOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	core, err := cs.CoreV1().Events("default").Get(ctx, "e", metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(core.Message).To(Equal("changed"))
	// kubectl get events and kubectl events both show what the
	// events.k8s.io patch changed.
	_, kubectl := kubectlFor(t, ts, "c1")
	for _, args := range [][]string{{"get", "events"}, {"events"}} {
		out, err := kubectl(args...)
		g.Expect(err).NotTo(HaveOccurred(), out)
		g.Expect(out).To(ContainSubstring("changed"), "kubectl %v", args)
	}

	// Server-side apply in one version of what another wrote in the other.
	_, err = cs.EventsV1().Events("default").Patch(ctx, "e", types.ApplyPatchType,
		[]byte(`{"apiVersion":"events.k8s.io/v1","kind":"Event","metadata":{"name":"e"},"note":"applied"}`),
		metav1.PatchOptions{FieldManager: "applier", Force: ptr.To(true)})
	g.Expect(err).NotTo(HaveOccurred())
	core, err = cs.CoreV1().Events("default").Get(ctx, "e", metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(core.Message).To(Equal("applied"))
	g.Expect(core.Reason).To(Equal("Pulled"))
	managers := map[string]string{}
	for _, m := range core.ManagedFields {
		managers[m.Manager] = m.APIVersion
	}
	g.Expect(managers).To(HaveKeyWithValue("applier", "events.k8s.io/v1"))
	g.Expect(cs.EventsV1().Events("default").Delete(ctx, "e", metav1.DeleteOptions{})).To(Succeed())
	_, err = cs.CoreV1().Events("default").Get(ctx, "e", metav1.GetOptions{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "got %v", err)

	_, err = cs.AutoscalingV2().HorizontalPodAutoscalers("default").Create(ctx, &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MaxReplicas:    3,
			Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{
				Metric: autoscalingv2.MetricIdentifier{Name: "qps"},
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr.To(resourceQuantityOf("10"))}}}},
		},
	}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	v1, err := cs.AutoscalingV1().HorizontalPodAutoscalers("default").Get(ctx, "web", metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	v1.Spec.MaxReplicas = 7
	_, err = cs.AutoscalingV1().HorizontalPodAutoscalers("default").Update(ctx, v1, metav1.UpdateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	v2, err := cs.AutoscalingV2().HorizontalPodAutoscalers("default").Get(ctx, "web", metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v2.Spec.MaxReplicas).To(Equal(int32(7)))
	g.Expect(v2.Spec.Metrics).To(HaveLen(1))
	g.Expect(v2.Spec.Metrics[0].Pods.Metric.Name).To(Equal("qps"))
	g.Expect(v2.Annotations).To(BeEmpty())
}

func resourceQuantityOf(s string) resourceQuantity { return apiresource.MustParse(s) }
