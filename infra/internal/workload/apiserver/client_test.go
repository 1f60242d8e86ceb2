package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/pager"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
)

func clientset(t testing.TB, ts *testServer, cluster string) *kubernetes.Clientset {
	t.Helper()
	cs, err := kubernetes.NewForConfig(ts.restConfig(t, cluster))
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func TestDiscoveryListsEveryServedResource(t *testing.T) {
	ts := startServer(t, store.Options{}, "c1")
	// Aggregated discovery (client-go's default) and the documents per
	// group version (older clients) say the same.
	for _, legacy := range []bool{false, true} {
		t.Run(fmt.Sprintf("legacy=%v", legacy), func(t *testing.T) {
			g := NewWithT(t)
			dc, err := discovery.NewDiscoveryClientForConfig(ts.restConfig(t, "c1"))
			g.Expect(err).NotTo(HaveOccurred())
			dc.UseLegacyDiscovery = legacy

			v, err := dc.ServerVersion()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(v.GitVersion).To(Equal(DefaultKubernetesVersion))

			before := ts.faults.served()
			groups, lists, err := dc.ServerGroupsAndResources()
			g.Expect(err).NotTo(HaveOccurred())
			if legacy {
				g.Expect(ts.faults.served()-before).To(Equal(2+len(builtinSet.groupVersions())), "/api, /apis and one document per group version")
			} else {
				g.Expect(ts.faults.served()-before).To(Equal(2), "/api and /apis, aggregated")
			}
			var groupNames []string
			for _, gr := range groups {
				groupNames = append(groupNames, gr.Name)
			}
			g.Expect(groupNames).To(ContainElements("", "apps", "rbac.authorization.k8s.io", "coordination.k8s.io", "events.k8s.io", "policy", "storage.k8s.io",
				"batch", "autoscaling", "authorization.k8s.io", "networking.k8s.io", "apiextensions.k8s.io"))
			served := map[string]metav1.APIResource{}
			for _, l := range lists {
				for _, r := range l.APIResources {
					served[l.GroupVersion+"/"+r.Name] = r
				}
			}
			for _, want := range []string{
				"v1/nodes", "v1/nodes/status", "v1/pods", "v1/pods/status", "v1/pods/eviction", "v1/configmaps", "v1/secrets",
				"v1/namespaces", "v1/serviceaccounts", "v1/events", "events.k8s.io/v1/events", "apps/v1/deployments",
				"apps/v1/daemonsets", "coordination.k8s.io/v1/leases", "rbac.authorization.k8s.io/v1/clusterroles",
				"rbac.authorization.k8s.io/v1/clusterrolebindings", "rbac.authorization.k8s.io/v1/roles",
				"rbac.authorization.k8s.io/v1/rolebindings", "policy/v1/poddisruptionbudgets",
				"v1/persistentvolumes", "v1/persistentvolumeclaims", "storage.k8s.io/v1/volumeattachments",
			} {
				g.Expect(served).To(HaveKey(want))
			}
			g.Expect(served["v1/pods"].Namespaced).To(BeTrue())
			g.Expect(served["v1/pods"].ShortNames).To(ConsistOf("po"))
			g.Expect(served["v1/nodes"].Namespaced).To(BeFalse())
			g.Expect(served["v1/pods/eviction"].Group).To(Equal("policy"))
			g.Expect(served["v1/pods/eviction"].Kind).To(Equal("Eviction"))
		})
	}
}

// rawStatus makes a request and decodes the Status the server answers.
func rawStatus(g Gomega, rc rest.Interface, method, path, contentType, body string) *metav1.Status {
	path, query, _ := strings.Cut(path, "?")
	req := rc.Verb(method).AbsPath(path)
	if query != "" {
		values, err := url.ParseQuery(query)
		g.Expect(err).NotTo(HaveOccurred())
		for k, vs := range values {
			for _, v := range vs {
				req = req.Param(k, v)
			}
		}
	}
	if contentType != "" {
		req = req.SetHeader("Content-Type", contentType)
	}
	if body != "" {
		req = req.Body([]byte(body))
	}
	err := req.Do(context.Background()).Error()
	g.Expect(err).To(HaveOccurred())
	var st apierrors.APIStatus
	g.Expect(err).To(BeAssignableToTypeOf(&apierrors.StatusError{}))
	st = err.(*apierrors.StatusError)
	s := st.Status()
	return &s
}

func TestErrorsAreKubernetesStatuses(t *testing.T) {
	g := NewWithT(t)
	ts := startServer(t, store.Options{}, "c1")
	cs := clientset(t, ts, "c1")
	rc := cs.CoreV1().RESTClient()
	ctx := context.Background()

	for _, tc := range []struct {
		name, method, path, contentType, body string
		code                                  int32
		reason                                metav1.StatusReason
	}{
		{"an unknown resource is 404", "GET", "/api/v1/widgets", "", "", 404, metav1.StatusReasonNotFound},
		{"an unknown group is 404", "GET", "/apis/example.com/v1/widgets", "", "", 404, metav1.StatusReasonNotFound},
		{"an unknown subresource is 404", "GET", "/api/v1/nodes/n/proxy", "", "", 404, metav1.StatusReasonNotFound},
		{"a missing object is 404", "GET", "/api/v1/namespaces/default/configmaps/absent", "", "", 404, metav1.StatusReasonNotFound},
		{"PUT on a collection is 405", "PUT", "/api/v1/namespaces/default/configmaps", "application/json", "{}", 405, metav1.StatusReasonMethodNotAllowed},
		{"POST on discovery is 405", "POST", "/api/v1", "application/json", "{}", 405, metav1.StatusReasonMethodNotAllowed},
		{"a bad label selector is 400", "GET", "/api/v1/pods?labelSelector=a%20in%20(", "", "", 400, metav1.StatusReasonBadRequest},
		{"an unsupported field label is 400", "GET", "/api/v1/pods?fieldSelector=spec.nope%3Dx", "", "", 400, metav1.StatusReasonBadRequest},
		{"a body of another kind is 400", "POST", "/api/v1/namespaces/default/configmaps", "application/json", `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"x"}}`, 400, metav1.StatusReasonBadRequest},
		{"a wrongly typed field is 400", "POST", "/api/v1/namespaces/default/configmaps", "application/json", `{"metadata":{"name":"x"},"data":"not a map"}`, 400, metav1.StatusReasonBadRequest},
		{"an upper-case name is 422", "POST", "/api/v1/namespaces/default/configmaps", "application/json", `{"metadata":{"name":"Upper"}}`, 422, metav1.StatusReasonInvalid},
		{"a namespace name with a dot is 422", "POST", "/api/v1/namespaces", "application/json", `{"metadata":{"name":"a.b"}}`, 422, metav1.StatusReasonInvalid},
		{"an object without a name is 422", "POST", "/api/v1/namespaces/default/configmaps", "application/json", `{"metadata":{}}`, 422, metav1.StatusReasonInvalid},
		{"CBOR is 415", "POST", "/api/v1/namespaces/default/configmaps", "application/cbor", "x", 415, metav1.StatusReasonUnsupportedMediaType},
		{"a broken protobuf body is 400", "POST", "/api/v1/namespaces/default/configmaps", "application/vnd.kubernetes.protobuf", "x", 400, metav1.StatusReasonBadRequest},
		{"a namespaced create into a missing namespace is 404", "POST", "/api/v1/namespaces/absent/configmaps", "application/json", `{"metadata":{"name":"x"}}`, 404, metav1.StatusReasonNotFound},
		{"a future resourceVersion is 504 too large", "GET", "/api/v1/nodes?resourceVersion=99999999999999999", "", "", 504, metav1.StatusReasonTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			st := rawStatus(g, rc, tc.method, tc.path, tc.contentType, tc.body)
			g.Expect(st.Code).To(Equal(tc.code), st.Message)
			g.Expect(st.Reason).To(Equal(tc.reason), st.Message)
		})
	}

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: "default"}}
	_, err := cs.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = cs.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{})
	g.Expect(apierrors.IsAlreadyExists(err)).To(BeTrue(), "got %v", err)
	_, err = cs.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{DryRun: []string{"Some"}})
	g.Expect(apierrors.IsBadRequest(err)).To(BeTrue(), "All is the one dryRun value, got %v", err)
}

func TestObjectsLifecycleThroughClientGo(t *testing.T) {
	g := NewWithT(t)
	ts := startServer(t, store.Options{}, "c1")
	cs := clientset(t, ts, "c1")
	ctx := context.Background()

	nss, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(nss.Items).To(HaveLen(4))
	g.Expect(nss.Items[0].Status.Phase).To(Equal(corev1.NamespaceActive))

	n, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n.UID).NotTo(BeEmpty())
	g.Expect(n.ResourceVersion).NotTo(BeEmpty())

	// The status subresource changes only status; the main resource keeps it.
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	n.Labels = map[string]string{"ignored": "by-status"}
	n, err = cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n.Status.Conditions).To(HaveLen(1))
	g.Expect(n.Labels).NotTo(HaveKey("ignored"))
	n.Status.Conditions = nil
	n.Spec.Unschedulable = true
	n, err = cs.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n.Status.Conditions).To(HaveLen(1), "an update of the main resource keeps the status")
	g.Expect(n.Spec.Unschedulable).To(BeTrue())

	// JSON patch and JSON merge patch.
	n, err = cs.CoreV1().Nodes().Patch(ctx, "n1", types.JSONPatchType, []byte(`[{"op":"add","path":"/metadata/labels","value":{"a":"b"}}]`), metav1.PatchOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n.Labels).To(HaveKeyWithValue("a", "b"))
	_, err = cs.CoreV1().Nodes().Patch(ctx, "n1", types.JSONPatchType, []byte(`[{"op":"test","path":"/metadata/labels/a","value":"x"}]`), metav1.PatchOptions{})
	g.Expect(apierrors.ReasonForError(err)).To(Equal(metav1.StatusReasonInvalid), "a failed JSON patch test is 422, got %v", err)
	n, err = cs.CoreV1().Nodes().Patch(ctx, "n1", types.MergePatchType, []byte(`{"metadata":{"labels":{"a":null,"c":"d"}}}`), metav1.PatchOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n.Labels).To(Equal(map[string]string{"c": "d"}))
	_, err = cs.CoreV1().Nodes().Patch(ctx, "n1", types.MergePatchType, []byte(`{"metadata":{"resourceVersion":"1"}}`), metav1.PatchOptions{})
	g.Expect(apierrors.IsConflict(err)).To(BeTrue(), "a patch carrying a stale resourceVersion conflicts, got %v", err)

	// Pods: nodeName field selector, eviction.
	for _, p := range []struct{ name, node string }{{"a", "n1"}, {"b", "n2"}} {
		_, err := cs.CoreV1().Pods("default").Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: p.name},
			Spec:       corev1.PodSpec{NodeName: p.node, Containers: []corev1.Container{{Name: "c", Image: "i"}}},
		}, metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
	}
	onN1, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=n1"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(onN1.Items).To(HaveLen(1))
	g.Expect(onN1.Items[0].Name).To(Equal("a"))
	g.Expect(onN1.Items[0].Status.Phase).To(Equal(corev1.PodPending))

	err = cs.CoreV1().Pods("default").EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "default"}})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = cs.CoreV1().Pods("default").Get(ctx, "a", metav1.GetOptions{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "an evicted pod is gone, got %v", err)
	err = cs.CoreV1().Pods("default").EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "default"}})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "got %v", err)

	// Finalizers hold a delete.
	_, err = cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "held", Finalizers: []string{"example.com/f"}}}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cs.CoreV1().ConfigMaps("default").Delete(ctx, "held", metav1.DeleteOptions{})).To(Succeed())
	held, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "held", metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(held.DeletionTimestamp).NotTo(BeNil())
	_, err = cs.CoreV1().ConfigMaps("default").Patch(ctx, "held", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = cs.CoreV1().ConfigMaps("default").Get(ctx, "held", metav1.GetOptions{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "got %v", err)

	// RBAC names are path segments, as kubeadm's system: roles need.
	_, err = cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "system:controller:bootstrap-signer"}}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())

	// Another cluster on the same listener sees none of it.
	other := startServerSecondCluster(t, ts)
	_, err = other.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "got %v", err)
}

func startServerSecondCluster(t *testing.T, _ *testServer) *kubernetes.Clientset {
	ts := startServer(t, store.Options{}, "c1", "c2")
	return clientset(t, ts, "c2")
}

func TestHealthAndRoot(t *testing.T) {
	g := NewWithT(t)
	ts := startServer(t, store.Options{}, "c1")
	rc := clientset(t, ts, "c1").CoreV1().RESTClient()
	for _, p := range []string{"/", "/healthz", "/readyz", "/livez"} {
		var code int
		rc.Get().AbsPath(p).Do(context.Background()).StatusCode(&code)
		g.Expect(code).To(Equal(http.StatusOK), p)
	}
}

func TestEvictionHonoursPodDisruptionBudgets(t *testing.T) {
	g := NewWithT(t)
	ts := startServer(t, store.Options{}, "c1")
	cs := clientset(t, ts, "c1")
	ctx := context.Background()
	for _, name := range []string{"web-0", "web-1"} {
		_, err := cs.CoreV1().Pods("default").Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "web"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}},
		}, metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
	}
	pdb, err := cs.PolicyV1().PodDisruptionBudgets("default").Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
	}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	evict := func(name string) error {
		return cs.CoreV1().Pods("default").EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}})
	}

	err = evict("web-0")
	g.Expect(apierrors.IsTooManyRequests(err)).To(BeTrue(), "a budget nobody has processed refuses, got %v", err)

	pdb.Status = policyv1.PodDisruptionBudgetStatus{ObservedGeneration: pdb.Generation, DisruptionsAllowed: 1, CurrentHealthy: 2, DesiredHealthy: 1, ExpectedPods: 2}
	_, err = cs.PolicyV1().PodDisruptionBudgets("default").UpdateStatus(ctx, pdb, metav1.UpdateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(evict("web-0")).To(Succeed())
	err = evict("web-1")
	g.Expect(apierrors.IsTooManyRequests(err)).To(BeTrue(), "the one allowed disruption is used up, got %v", err)
	_, err = cs.CoreV1().Pods("default").Get(ctx, "web-1", metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
}

func TestMetadataOnlyClientsGetPartialObjectMetadata(t *testing.T) {
	g := NewWithT(t)
	ts := startServer(t, store.Options{}, "c1")
	mc, err := metadata.NewForConfig(ts.restConfig(t, "c1"))
	g.Expect(err).NotTo(HaveOccurred())
	ctx := context.Background()
	nsRes := corev1.SchemeGroupVersion.WithResource("namespaces")

	list, err := mc.Resource(nsRes).List(ctx, metav1.ListOptions{LabelSelector: "kubernetes.io/metadata.name=kube-system"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(list.Items).To(HaveLen(1))
	g.Expect(list.Items[0].Name).To(Equal("kube-system"))

	one, err := mc.Resource(nsRes).Get(ctx, "default", metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(one.UID).NotTo(BeEmpty())
	raw, err := clientset(t, ts, "c1").CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes").
		SetHeader("Accept", "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json").DoRaw(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(raw)).To(ContainSubstring(`"kind":"PartialObjectMetadataList"`))

	w, err := mc.Resource(nsRes).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	g.Expect(err).NotTo(HaveOccurred())
	defer w.Stop()
	_, err = clientset(t, ts, "c1").CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	var e watch.Event
	g.Eventually(w.ResultChan(), 10*time.Second).Should(Receive(&e))
	g.Expect(e.Type).To(Equal(watch.Added))
	g.Expect(e.Object.(*metav1.PartialObjectMetadata).Name).To(Equal("team"))
}

func TestConcurrentUnconditionalPatchesAllLand(t *testing.T) {
	g := NewWithT(t)
	ts := startServer(t, store.Options{}, "c1")
	cs := clientset(t, ts, "c1")
	ctx := context.Background()
	_, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())

	// Each writer sets its own label without a resourceVersion: the server
	// retries the ones that meet a concurrent write, so none is lost.
	const writers = 8
	errs := make(chan error, writers)
	for i := range writers {
		go func() {
			_, err := cs.CoreV1().Nodes().Patch(ctx, "n", types.StrategicMergePatchType,
				[]byte(`{"metadata":{"labels":{"writer-`+strconv.Itoa(i)+`":"yes"}}}`), metav1.PatchOptions{})
			errs <- err
		}()
	}
	for range writers {
		var err error
		g.Eventually(errs, 20*time.Second).Should(Receive(&err))
		g.Expect(err).NotTo(HaveOccurred())
	}
	n, err := cs.CoreV1().Nodes().Get(ctx, "n", metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n.Labels).To(HaveLen(writers))
}

func TestDryRunsChangeNothing(t *testing.T) {
	g := NewWithT(t)
	ts := startServer(t, store.Options{}, "c1")
	cs := clientset(t, ts, "c1")
	c := crClient(t, ts)
	ctx := context.Background()
	all := []string{metav1.DryRunAll}
	rv := ts.clusters["c1"].store.ResourceVersion()

	would, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}, metav1.CreateOptions{DryRun: all})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(would.Name).To(Equal("n"))
	_, err = cs.CoreV1().Nodes().Get(ctx, "n", metav1.GetOptions{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "got %v", err)
	g.Expect(ts.clusters["c1"].store.ResourceVersion()).To(Equal(rv))

	_, err = cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.Apply(ctx, corev1ac.Node("n").WithLabels(map[string]string{"a": "b"}), client.FieldOwner("t"), client.DryRunAll)).To(Succeed())
	_, err = cs.CoreV1().Nodes().Patch(ctx, "n", types.MergePatchType, []byte(`{"metadata":{"labels":{"c":"d"}}}`), metav1.PatchOptions{DryRun: all})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cs.CoreV1().Nodes().Delete(ctx, "n", metav1.DeleteOptions{DryRun: all})).To(Succeed())
	n, err := cs.CoreV1().Nodes().Get(ctx, "n", metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred(), "a dry-run delete leaves the object")
	g.Expect(n.Labels).To(BeEmpty(), "dry-run patches leave it unchanged")

	_, err = cs.CoreV1().Pods("default").Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}},
	}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cs.CoreV1().Pods("default").EvictV1(ctx, &policyv1.Eviction{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}, DeleteOptions: &metav1.DeleteOptions{DryRun: all},
	})).To(Succeed())
	_, err = cs.CoreV1().Pods("default").Get(ctx, "p", metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred(), "a dry-run eviction leaves the pod")
}

func TestListsPaginate(t *testing.T) {
	g := NewWithT(t)
	ts := startServer(t, store.Options{}, "c1")
	cs := clientset(t, ts, "c1")
	ctx := context.Background()
	for i := range 5 {
		_, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n" + strconv.Itoa(i)}}, metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
	}
	first, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 2})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(first.Items).To(HaveLen(2))
	g.Expect(first.Continue).NotTo(BeEmpty())
	g.Expect(*first.RemainingItemCount).To(Equal(int64(3)))

	// client-go's pager follows the continue tokens.
	var names []string
	p := pager.New(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		return cs.CoreV1().Nodes().List(ctx, opts)
	})
	p.PageSize = 2
	g.Expect(p.EachListItem(ctx, metav1.ListOptions{}, func(obj runtime.Object) error {
		names = append(names, obj.(*corev1.Node).Name)
		return nil
	})).To(Succeed())
	g.Expect(names).To(Equal([]string{"n0", "n1", "n2", "n3", "n4"}))

	// A token outlived by a change to nodes is 410 Gone.
	_, err = cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n5"}}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 2, Continue: first.Continue})
	g.Expect(apierrors.IsResourceExpired(err)).To(BeTrue(), "got %v", err)
}

func TestUnknownFieldsFollowFieldValidation(t *testing.T) {
	g := NewWithT(t)
	ts := startServer(t, store.Options{}, "c1")
	cs := clientset(t, ts, "c1")
	rc := cs.CoreV1().RESTClient()
	ctx := context.Background()
	body := func(name string) []byte {
		return []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"` + name + `"},"data":{"a":"b"},"bogus":1}`)
	}
	post := func(name, mode string) rest.Result {
		req := rc.Post().AbsPath("/api/v1/namespaces/default/configmaps").SetHeader("Content-Type", "application/json").Body(body(name))
		if mode != "" {
			req = req.Param("fieldValidation", mode)
		}
		return req.Do(ctx)
	}

	err := post("strict", "Strict").Error()
	g.Expect(apierrors.IsBadRequest(err)).To(BeTrue(), "got %v", err)
	g.Expect(err.Error()).To(ContainSubstring(`unknown field "bogus"`))

	res := post("warned", "")
	g.Expect(res.Error()).NotTo(HaveOccurred())
	g.Expect(res.Warnings()).To(HaveLen(1))
	g.Expect(res.Warnings()[0].Text).To(ContainSubstring(`unknown field "bogus"`))

	res = post("ignored", "Ignore")
	g.Expect(res.Error()).NotTo(HaveOccurred())
	g.Expect(res.Warnings()).To(BeEmpty())

	raw, err := rc.Get().AbsPath("/api/v1/namespaces/default/configmaps/warned").DoRaw(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(raw)).NotTo(ContainSubstring("bogus"), "unknown fields are never stored")
}

// /version is the cluster's own: the default before any control plane
// Node exists, then the oldest kubelet version among its control plane
// Nodes (mid rolling upgrade, the version every kube-apiserver reached);
// workers do not count, and each cluster answers for itself.
func TestVersionFollowsTheControlPlaneNodes(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ts := startServer(t, store.Options{}, "c1", "c2")
	c1, c2 := clientset(t, ts, "c1"), clientset(t, ts, "c2")
	gitVersion := func(cs *kubernetes.Clientset) string {
		v, err := cs.Discovery().ServerVersion()
		g.Expect(err).NotTo(HaveOccurred())
		return v.GitVersion
	}
	g.Expect(gitVersion(c1)).To(Equal(DefaultKubernetesVersion))

	node := func(name, kubelet string, controlPlane bool) {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
		if controlPlane {
			n.Labels["node-role.kubernetes.io/control-plane"] = ""
		}
		created, err := c1.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		created.Status.NodeInfo.KubeletVersion = kubelet
		_, err = c1.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
	}
	node("worker", "v1.35.1", false)
	g.Expect(gitVersion(c1)).To(Equal(DefaultKubernetesVersion), "workers do not count")
	node("cp-new", "v1.37.0", true)
	g.Expect(gitVersion(c1)).To(Equal("v1.37.0"))
	node("cp-old", "v1.36.3", true)
	v, err := c1.Discovery().ServerVersion()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v.GitVersion).To(Equal("v1.36.3"), "the oldest control plane Node's")
	g.Expect(v.Major + "." + v.Minor).To(Equal("1.36"))
	g.Expect(c1.CoreV1().Nodes().Delete(ctx, "cp-old", metav1.DeleteOptions{})).To(Succeed())
	g.Expect(gitVersion(c1)).To(Equal("v1.37.0"), "rolled: the remaining control plane Node's")
	g.Expect(gitVersion(c2)).To(Equal(DefaultKubernetesVersion), "another cluster answers for itself")
}
