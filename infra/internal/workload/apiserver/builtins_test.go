package apiserver

import (
	"context"
	"net/http"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/scale"
	"k8s.io/utils/ptr"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
)

func podTemplate(app string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}},
	}
}

// workloadsOfGetAll makes one object of every kind in category all.
func workloadsOfGetAll(t *testing.T, ts *testServer) {
	g := NewWithT(t)
	cs := clientset(t, ts, "c1")
	ctx := context.Background()
	ns := "default"
	sel := func(app string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}
	}
	_, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "solo"}, Spec: podTemplate("solo").Spec}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, ClusterIP: "10.96.0.10", Selector: map[string]string{"app": "web"},
			Ports: []corev1.ServicePort{{Port: 80, NodePort: 30080, Protocol: corev1.ProtocolTCP}}},
	}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = cs.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](2), Selector: sel("web"), Template: podTemplate("web")}}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = cs.AppsV1().ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web-1"},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](2), Selector: sel("web"), Template: podTemplate("web")}}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = cs.AppsV1().StatefulSets(ns).Create(ctx, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](3), Selector: sel("db"), Template: podTemplate("db")}}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = cs.AppsV1().DaemonSets(ns).Create(ctx, &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "agent"},
		Spec: appsv1.DaemonSetSpec{Selector: sel("agent"), Template: podTemplate("agent")}}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = cs.CoreV1().ReplicationControllers(ns).Create(ctx, &corev1.ReplicationController{ObjectMeta: metav1.ObjectMeta{Name: "legacy"},
		Spec: corev1.ReplicationControllerSpec{Replicas: ptr.To[int32](1), Selector: map[string]string{"app": "legacy"}, Template: ptr.To(podTemplate("legacy"))}}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	job := batchv1.JobSpec{Template: podTemplate("once")}
	job.Template.Spec.RestartPolicy = corev1.RestartPolicyNever
	_, err = cs.BatchV1().Jobs(ns).Create(ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "once"}, Spec: job}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = cs.BatchV1().CronJobs(ns).Create(ctx, &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Name: "nightly"},
		Spec: batchv1.CronJobSpec{Schedule: "0 3 * * *", JobTemplate: batchv1.JobTemplateSpec{Spec: job}}}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = cs.AutoscalingV2().HorizontalPodAutoscalers(ns).Create(ctx, &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}, MaxReplicas: 5}}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
}

func TestKubectlGetAllListsCategoryAll(t *testing.T) {
	g := NewWithT(t)
	ts := startServer(t, store.Options{}, "c1")
	workloadsOfGetAll(t, ts)
	_, kubectl := kubectlFor(t, ts, "c1")
	out, err := kubectl("get", "all", "-A")
	g.Expect(err).NotTo(HaveOccurred(), out)
	for _, line := range []string{
		`default\s+pod/solo\s+0/1\s+Pending\s+0`,
		`default\s+service/web\s+NodePort\s+10\.96\.0\.10\s+<none>\s+80:30080/TCP`,
		`default\s+daemonset\.apps/agent\s+0\s+0\s+0\s+0\s+0`,
		`default\s+deployment\.apps/web\s+0/2\s+0\s+0`,
		`default\s+replicaset\.apps/web-1\s+2\s+0\s+0`,
		`default\s+statefulset\.apps/db\s+0/3`,
		`default\s+replicationcontroller/legacy\s+1\s+0\s+0`,
		`default\s+job\.batch/once\s+Running\s+0/1`,
		`default\s+cronjob\.batch/nightly\s+0 3 \* \* \*\s+<none>\s+False\s+0\s+<none>`,
		`default\s+horizontalpodautoscaler\.autoscaling/web\s+Deployment/web\s+<unknown>\s+1\s+5\s+0`,
	} {
		g.Expect(out).To(MatchRegexp(line))
	}
}

func TestKubectlExplainsBuiltinKinds(t *testing.T) {
	g := NewWithT(t)
	ts := startServerWith(t, Options{OpenAPI: managementOpenAPI(t)}, store.Options{}, "c1")
	_, kubectl := kubectlFor(t, ts, "c1")
	for what, want := range map[string]string{
		"cronjob.spec.schedule":                 "KIND:       CronJob",
		"hpa.spec.metrics":                      "KIND:       HorizontalPodAutoscaler",
		"ingress.spec.rules":                    "KIND:       Ingress",
		"selfsubjectaccessreview.status":        "KIND:       SelfSubjectAccessReview",
		"tokenreview.spec.token":                "KIND:       TokenReview",
		"validatingadmissionpolicy.spec":        "KIND:       ValidatingAdmissionPolicy",
		"statefulset.spec.volumeClaimTemplates": "KIND:       StatefulSet",
	} {
		out, err := kubectl("explain", what)
		g.Expect(err).NotTo(HaveOccurred(), out)
		g.Expect(out).To(ContainSubstring(want), what)
	}
}

func TestScaleSubresourcesSetReplicas(t *testing.T) {
	g := NewWithT(t)
	ts := startServer(t, store.Options{}, "c1")
	workloadsOfGetAll(t, ts)
	cs := clientset(t, ts, "c1")
	ctx := context.Background()
	dc, err := discovery.NewDiscoveryClientForConfig(ts.restConfig(t, "c1"))
	g.Expect(err).NotTo(HaveOccurred())
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	scales, err := scale.NewForConfig(ts.restConfig(t, "c1"), mapper, dynamic.LegacyAPIPathResolverFunc, scale.NewDiscoveryScaleKindResolver(dc))
	g.Expect(err).NotTo(HaveOccurred())

	for _, c := range []struct {
		gr       schema.GroupResource
		name     string
		replicas int32
		selector string
	}{
		{schema.GroupResource{Group: "apps", Resource: "deployments"}, "web", 2, "app=web"},
		{schema.GroupResource{Group: "apps", Resource: "replicasets"}, "web-1", 2, "app=web"},
		{schema.GroupResource{Group: "apps", Resource: "statefulsets"}, "db", 3, "app=db"},
		{schema.GroupResource{Resource: "replicationcontrollers"}, "legacy", 1, "app=legacy"},
	} {
		s, err := scales.Scales("default").Get(ctx, c.gr, c.name, metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred(), c.gr.String())
		g.Expect(s.Spec.Replicas).To(Equal(c.replicas))
		g.Expect(s.Status.Selector).To(Equal(c.selector))
		s.Spec.Replicas = 4
		s, err = scales.Scales("default").Update(ctx, c.gr, s, metav1.UpdateOptions{})
		g.Expect(err).NotTo(HaveOccurred(), c.gr.String())
		g.Expect(s.Spec.Replicas).To(Equal(int32(4)))
		gvr, err := mapper.ResourceFor(c.gr.WithVersion(""))
		g.Expect(err).NotTo(HaveOccurred())
		s, err = scales.Scales("default").Patch(ctx, gvr, c.name, types.MergePatchType, []byte(`{"spec":{"replicas":5}}`), metav1.PatchOptions{})
		g.Expect(err).NotTo(HaveOccurred(), c.gr.String())
		g.Expect(s.Spec.Replicas).To(Equal(int32(5)))
	}
	d, err := cs.AppsV1().Deployments("default").Get(ctx, "web", metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(*d.Spec.Replicas).To(Equal(int32(5)))

	// A stale resourceVersion is a conflict; negative replicas are invalid.
	_, err = cs.AppsV1().Deployments("default").UpdateScale(ctx, "web", &autoscalingv1.Scale{
		ObjectMeta: metav1.ObjectMeta{Name: "web", ResourceVersion: "1"}, Spec: autoscalingv1.ScaleSpec{Replicas: 1},
	}, metav1.UpdateOptions{})
	g.Expect(apierrors.IsConflict(err)).To(BeTrue(), "got %v", err)
	_, err = cs.AppsV1().Deployments("default").UpdateScale(ctx, "web", &autoscalingv1.Scale{
		ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: autoscalingv1.ScaleSpec{Replicas: -1},
	}, metav1.UpdateOptions{})
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)

	_, kubectl := kubectlFor(t, ts, "c1")
	out, err := kubectl("scale", "statefulset", "db", "--replicas", "7")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("statefulset.apps/db scaled"))
	sts, err := cs.AppsV1().StatefulSets("default").Get(ctx, "db", metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(*sts.Spec.Replicas).To(Equal(int32(7)))
}

func TestPodSubresources(t *testing.T) {
	g := NewWithT(t)
	ts := startServer(t, store.Options{}, "c1")
	cs := clientset(t, ts, "c1")
	ctx := context.Background()
	_, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w-0"},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.7"}}}}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	for _, name := range []string{"a", "b", "two"} {
		spec := podTemplate(name).Spec
		if name == "two" {
			spec.Containers = append(spec.Containers, corev1.Container{Name: "sidecar", Image: "i"})
		}
		_, err := cs.CoreV1().Pods("default").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}, metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
	}

	// A pod's log before it has a node is empty, as kube-apiserver's.
	logs, err := cs.CoreV1().Pods("default").GetLogs("a", &corev1.PodLogOptions{}).DoRaw(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(logs).To(BeEmpty())
	_, err = cs.CoreV1().Pods("default").GetLogs("two", &corev1.PodLogOptions{}).Stream(ctx)
	g.Expect(apierrors.IsBadRequest(err)).To(BeTrue(), "got %v", err)
	g.Expect(err.Error()).To(ContainSubstring("a container name must be specified for pod two, choose one of: [c sidecar]"))

	// Exec before scheduling: no host.
	_, kubectl := kubectlFor(t, ts, "c1")
	out, err := kubectl("exec", "a", "--", "true")
	g.Expect(err).To(HaveOccurred())
	g.Expect(out).To(ContainSubstring("pod a does not have a host assigned"))

	// pods/binding and core bindings set the node, once.
	g.Expect(cs.CoreV1().Pods("default").Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "a"},
		Target: corev1.ObjectReference{Kind: "Node", Name: "w-0"}}, metav1.CreateOptions{})).To(Succeed())
	err = cs.CoreV1().RESTClient().Post().AbsPath("/api/v1/namespaces/default/bindings").
		Body([]byte(`{"apiVersion":"v1","kind":"Binding","metadata":{"name":"b"},"target":{"name":"w-0"}}`)).Do(ctx).Error()
	g.Expect(err).NotTo(HaveOccurred())
	for _, name := range []string{"a", "b"} {
		p, err := cs.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(p.Spec.NodeName).To(Equal("w-0"))
		g.Expect(p.Status.Conditions).To(ContainElement(And(
			HaveField("Type", corev1.PodScheduled), HaveField("Status", corev1.ConditionTrue))))
		g.Expect(p.Status.Phase).To(Equal(corev1.PodPending), "the status beside the condition stays")
	}
	err = cs.CoreV1().Pods("default").Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "a"},
		Target: corev1.ObjectReference{Name: "w-1"}}, metav1.CreateOptions{})
	g.Expect(apierrors.IsConflict(err)).To(BeTrue(), "got %v", err)
	g.Expect(err.Error()).To(ContainSubstring(`pod a is already assigned to node "w-0"`))

	// Scheduled, exec and attach reach for a kubelet there is none of.
	out, err = kubectl("exec", "a", "--", "true")
	g.Expect(err).To(HaveOccurred())
	g.Expect(out).To(ContainSubstring("error dialing backend: dial tcp 10.0.0.7:10250: connect: connection refused"))
	logs, err = cs.CoreV1().Pods("default").GetLogs("a", &corev1.PodLogOptions{Container: "c"}).DoRaw(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(logs).To(BeEmpty())
	out, err = kubectl("logs", "a")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(BeEmpty())

	// ephemeralcontainers writes only the ephemeral containers.
	p, err := cs.CoreV1().Pods("default").Get(ctx, "a", metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	p.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug", Image: "busybox"}}}
	p.Labels = map[string]string{"ignored": "yes"}
	p, err = cs.CoreV1().Pods("default").UpdateEphemeralContainers(ctx, "a", p, metav1.UpdateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p.Spec.EphemeralContainers).To(HaveLen(1))
	g.Expect(p.Labels).NotTo(HaveKey("ignored"))
}

func TestComponentStatusesAndVerbs(t *testing.T) {
	g := NewWithT(t)
	ts := startServer(t, store.Options{}, "c1")
	cs := clientset(t, ts, "c1")
	ctx := context.Background()
	list, err := cs.CoreV1().ComponentStatuses().List(ctx, metav1.ListOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(list.Items).To(HaveLen(3))
	etcd, err := cs.CoreV1().ComponentStatuses().Get(ctx, "etcd-0", metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(etcd.Conditions).To(ConsistOf(HaveField("Status", corev1.ConditionTrue)))
	_, kubectl := kubectlFor(t, ts, "c1")
	out, err := kubectl("get", "componentstatuses")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(MatchRegexp(`scheduler\s+Healthy\s+ok`))

	// A verb a resource does not have: 405 where the path serves others,
	// 404 where it serves none.
	rc := cs.CoreV1().RESTClient()
	g.Expect(rawStatus(g, rc, http.MethodPost, "/api/v1/componentstatuses", "application/json", `{}`).Code).To(BeEquivalentTo(http.StatusMethodNotAllowed))
	g.Expect(rawStatus(g, rc, http.MethodGet, "/api/v1/namespaces/default/bindings", "", "").Code).To(BeEquivalentTo(http.StatusMethodNotAllowed))
	g.Expect(rawStatus(g, rc, http.MethodGet, "/api/v1/namespaces/default/bindings/x", "", "").Code).To(BeEquivalentTo(http.StatusNotFound))
	g.Expect(rawStatus(g, rc, http.MethodDelete, "/apis/apps/v1/namespaces/default/deployments/x/scale", "", "").Code).To(BeEquivalentTo(http.StatusMethodNotAllowed))
	g.Expect(rawStatus(g, rc, http.MethodGet, "/apis/authentication.k8s.io/v1/tokenreviews?watch=true", "", "").Code).To(BeEquivalentTo(http.StatusMethodNotAllowed))
}

func TestSubresourcesWriteOnlyTheirFields(t *testing.T) {
	g := NewWithT(t)
	ts := startServer(t, store.Options{}, "c1")
	cs := clientset(t, ts, "c1")
	ctx := context.Background()

	// namespaces/finalize writes spec.finalizers; an update of the
	// Namespace keeps them.
	ns, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"},
		Spec: corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{corev1.FinalizerKubernetes}}}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	ns.Spec.Finalizers = nil
	ns.Labels = map[string]string{"updated": "yes"}
	ns, err = cs.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ns.Spec.Finalizers).To(ConsistOf(corev1.FinalizerKubernetes), "an update keeps the finalizers")
	g.Expect(ns.Labels).To(HaveKeyWithValue("updated", "yes"))
	ns.Spec.Finalizers = nil
	ns.Labels = nil
	ns, err = cs.CoreV1().Namespaces().Finalize(ctx, ns, metav1.UpdateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ns.Spec.Finalizers).To(BeEmpty())
	g.Expect(ns.Labels).To(HaveKeyWithValue("updated", "yes"), "finalize keeps the rest")

	// pods/resize writes the containers' resources only.
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: podTemplate("p").Spec}
	pod, err = cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	pod.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: apiresource.MustParse("250m")}
	pod.Spec.Containers[0].Image = "other"
	pod, err = cs.CoreV1().Pods("default").UpdateResize(ctx, "p", pod, metav1.UpdateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pod.Spec.Containers[0].Resources.Requests.Cpu().String()).To(Equal("250m"))
	g.Expect(pod.Spec.Containers[0].Image).To(Equal("i"))
}
