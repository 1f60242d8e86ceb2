package apiserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
)

// fuzzAllocBound bounds what one request may allocate, whatever it asks:
// the body is at most maxBodyBytes (3 MiB), decoded and encoded a few
// times, and a JSON patch's copies add at most maxJSONPatchCopyBytes.
// Without the copy bound one patch allocated gigabytes (issue 28).
const fuzzAllocBound = 64 << 20

// fuzzWatchTimeout ends each request's context, so that a watch (which
// streams until its client leaves) ends too and the fuzzer goes on.
const fuzzWatchTimeout = 100 * time.Millisecond

// fuzzRequestBound bounds how long one request takes: a watch ends with
// its context, anything else is over in milliseconds.
const fuzzRequestBound = 5 * time.Second

// allowedCodes are the codes the handler answers. No 5xx: 500 is a bug
// (the handler's recover), and the documented 503 (OpenAPI documents not
// available) cannot happen without Options.OpenAPI.
var allowedCodes = map[int]bool{
	http.StatusOK: true, http.StatusCreated: true,
	http.StatusBadRequest: true, http.StatusNotFound: true, http.StatusMethodNotAllowed: true,
	http.StatusNotAcceptable: true, http.StatusConflict: true, http.StatusGone: true,
	http.StatusRequestEntityTooLarge: true, http.StatusUnsupportedMediaType: true,
	http.StatusUnprocessableEntity: true, http.StatusTooManyRequests: true,
}

// bigValue is the value of the seeded ConfigMap "big" that a JSON patch
// can copy: 256 KiB, as in issue 28's measurement.
var bigValue = strings.Repeat("x", 256<<10)

// fuzzStore is a cluster's store with something in it to list, watch,
// patch and delete: a Node, a Pod bound to it, the ConfigMap "big", a
// PodDisruptionBudget (evictions), and widgetCRD with the Widget "w1"
// (the CRD is established by the cluster's first request).
func fuzzStore(tb testing.TB) *store.Store {
	tb.Helper()
	st := store.New(store.Options{})
	crd, err := k8sruntime.DefaultUnstructuredConverter.ToUnstructured(widgetCRD())
	if err != nil {
		tb.Fatal(err)
	}
	crd["apiVersion"], crd["kind"] = "apiextensions.k8s.io/v1", "CustomResourceDefinition"
	for _, o := range []struct {
		res store.Resource
		obj map[string]any
	}{
		{store.Resource{Resource: "nodes"}, map[string]any{"apiVersion": "v1", "kind": "Node",
			"metadata": map[string]any{"name": "n1", "labels": map[string]any{"app": "a", "tier": "cp"}}}},
		{store.Resource{Resource: "pods", Namespaced: true}, map[string]any{"apiVersion": "v1", "kind": "Pod",
			"metadata": map[string]any{"name": "p1", "namespace": "default", "labels": map[string]any{"app": "a"}},
			"spec":     map[string]any{"nodeName": "n1", "containers": []any{map[string]any{"name": "c", "image": "busybox"}}}}},
		{store.Resource{Resource: "configmaps", Namespaced: true}, map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "big", "namespace": "default"}, "data": map[string]any{"a": bigValue}}},
		{store.Resource{Group: "policy", Resource: "poddisruptionbudgets", Namespaced: true}, map[string]any{"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
			"metadata": map[string]any{"name": "pdb", "namespace": "default"},
			"spec":     map[string]any{"minAvailable": int64(1), "selector": map[string]any{"matchLabels": map[string]any{"app": "a"}}}}},
		{crdResource.storeResource(), crd},
		{store.Resource{Group: "example.com", Resource: "widgets", Namespaced: true}, map[string]any{"apiVersion": "example.com/v1", "kind": "Widget",
			"metadata": map[string]any{"name": "w1", "namespace": "default"}, "spec": map[string]any{"replicas": int64(1), "color": "red"}}},
	} {
		if _, err := st.Create(o.res, &unstructured.Unstructured{Object: o.obj}); err != nil {
			tb.Fatalf("failed to seed the store: %v", err)
		}
	}
	return st
}

// copyBomb is issue 28's patch scaled to the seed: n "copy" operations of
// the 256 KiB value.
func copyBomb(n int) []byte {
	ops := make([]map[string]string, 0, n)
	for i := range n {
		ops = append(ops, map[string]string{"op": "copy", "from": "/data/a", "path": fmt.Sprintf("/data/c%d", i)})
	}
	b, _ := json.Marshal(ops)
	return b
}

type fuzzSeed struct {
	method, path, query, contentType string
	body                             []byte
}

func fuzzSeeds() []fuzzSeed {
	const (
		jsonCT   = "application/json"
		jsonP    = "application/json-patch+json"
		mergeP   = "application/merge-patch+json"
		smp      = "application/strategic-merge-patch+json"
		apply    = "application/apply-patch+yaml"
		cm       = "/api/v1/namespaces/default/configmaps"
		pods     = "/api/v1/namespaces/default/pods"
		newCM    = `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c2","labels":{"app":"b"}},"data":{"k":"v"}}`
		eviction = `{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"p1","namespace":"default"}}`
		widgets  = "/apis/example.com/v1/namespaces/default/widgets"
		crds     = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
	)
	return []fuzzSeed{
		// Discovery and the rest of the tree.
		{method: "GET", path: "/api"}, {method: "GET", path: "/apis"}, {method: "GET", path: "/version"},
		{method: "GET", path: "/api/v1"}, {method: "GET", path: "/apis/apps/v1"}, {method: "GET", path: "/openapi/v3"},
		{method: "GET", path: "/healthz"}, {method: "GET", path: "/nope/../api//v1"},
		// Lists with selectors, pagination, tables.
		{method: "GET", path: "/api/v1/nodes", query: "labelSelector=app+in+(a,b),!x,tier!=w"},
		{method: "GET", path: pods, query: "fieldSelector=spec.nodeName%3Dn1,metadata.name!%3Dp2"},
		{method: "GET", path: "/api/v1/pods", query: "fieldSelector=status.phase%3D%3DRunning&labelSelector=app"},
		{method: "GET", path: pods, query: "labelSelector=%28%28%28&fieldSelector=nope"},
		{method: "GET", path: cm, query: "limit=1&continue=garbage"},
		{method: "GET", path: cm, query: "limit=-1"},
		{method: "GET", path: "/api/v1/nodes", query: "resourceVersion=0&resourceVersionMatch=NotOlderThan"},
		{method: "GET", path: "/api/v1/nodes/n1", query: "", contentType: ""},
		// Built-ins beyond storage: subresources, reviews, verbs they lack.
		{method: "POST", path: pods + "/p1/exec", query: "command=true&stdout=true"},
		{method: "GET", path: pods + "/p1/log", query: "container=nope"},
		{method: "PUT", path: "/apis/apps/v1/namespaces/default/deployments/d/scale", contentType: jsonCT, body: []byte(`{"kind":"Scale","apiVersion":"autoscaling/v1","metadata":{"name":"d"},"spec":{"replicas":2}}`)},
		{method: "POST", path: "/apis/authorization.k8s.io/v1/subjectaccessreviews", contentType: jsonCT, body: []byte(`{"kind":"SubjectAccessReview","apiVersion":"authorization.k8s.io/v1","spec":{"user":"u","resourceAttributes":{"verb":"get","resource":"pods"}}}`)},
		{method: "POST", path: "/api/v1/namespaces/default/bindings", contentType: jsonCT, body: []byte(`{"kind":"Binding","apiVersion":"v1","metadata":{"name":"p1"},"target":{"name":"n1"}}`)},
		{method: "GET", path: "/api/v1/componentstatuses", query: "watch=true"},
		// Watches: from now, from the start with bookmarks, from a version
		// long gone (410), with initial events, with a timeout.
		{method: "GET", path: "/api/v1/nodes", query: "watch=true"},
		{method: "GET", path: pods, query: "watch=1&resourceVersion=0&allowWatchBookmarks=true&timeoutSeconds=1"},
		{method: "GET", path: pods, query: "watch=true&resourceVersion=1&labelSelector=app%3Da"},
		{method: "GET", path: cm, query: "watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"},
		{method: "GET", path: cm, query: "watch=true&timeoutSeconds=-5&resourceVersion=abc"},
		{method: "GET", path: "/api/v1/watch/namespaces/default/pods/p1"},
		// Writes.
		{method: "POST", path: cm, contentType: jsonCT, body: []byte(newCM)},
		{method: "POST", path: cm, query: "dryRun=All&fieldValidation=Strict", contentType: jsonCT, body: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c3"},"bogus":1}`)},
		{method: "POST", path: cm, contentType: "application/yaml", body: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  generateName: g-\n")},
		{method: "PUT", path: cm + "/big", contentType: jsonCT, body: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"big","resourceVersion":"1"}}`)},
		{method: "PUT", path: "/api/v1/nodes/n1/status", contentType: jsonCT, body: []byte(`{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1"},"status":{"phase":"Running"}}`)},
		{method: "DELETE", path: pods + "/p1", contentType: jsonCT, body: []byte(`{"kind":"DeleteOptions","apiVersion":"v1","gracePeriodSeconds":0,"preconditions":{"uid":"x"}}`)},
		{method: "DELETE", path: cm, query: "labelSelector=app%3Db"},
		{method: "POST", path: pods + "/p1/eviction", contentType: jsonCT, body: []byte(eviction)},
		// Every patch type, server-side apply among them.
		{method: "PATCH", path: cm + "/big", contentType: jsonP, body: []byte(`[{"op":"add","path":"/data/b","value":"c"},{"op":"test","path":"/data/b","value":"c"}]`)},
		{method: "PATCH", path: cm + "/big", contentType: jsonP, body: copyBomb(1000)},
		{method: "PATCH", path: cm + "/big", contentType: jsonP, body: []byte(`[{"op":"move","from":"/data","path":"/data/x"}]`)},
		{method: "PATCH", path: cm + "/big", contentType: mergeP, body: []byte(`{"data":{"a":null,"b":"c"},"metadata":{"labels":{"x":"y"}}}`)},
		{method: "PATCH", path: "/api/v1/nodes/n1", contentType: smp, body: []byte(`{"spec":{"taints":[{"key":"k","effect":"NoSchedule"}]},"metadata":{"$patch":"replace"}}`)},
		{method: "PATCH", path: pods + "/p1", contentType: smp, body: []byte(`{"spec":{"containers":[{"name":"c","image":"b2"},{"$patch":"delete","name":"x"}]}}`)},
		{method: "PATCH", path: cm + "/c9", query: "fieldManager=fuzz&force=true", contentType: apply, body: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c9\ndata:\n  k: v\n")},
		{method: "PATCH", path: cm + "/big", query: "fieldManager=other", contentType: apply, body: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big\ndata:\n  a: mine\n")},
		{method: "PATCH", path: cm + "/big", contentType: apply, body: []byte("{}")},
		{method: "PATCH", path: cm + "/big", contentType: "application/apply-patch+cbor", body: []byte{0xa0}},
		{method: "PATCH", path: cm + "/big", contentType: "text/plain; charset=", body: []byte("x")},
		// CRDs and custom objects: both versions, subresources, every
		// patch type, an invalid CRD, the CRD's deletion.
		{method: "GET", path: "/apis/example.com/v1beta1/namespaces/default/widgets", query: "watch=true&resourceVersion=0"},
		{method: "GET", path: "/apis/example.com/v1/widgets", query: "limit=1"},
		{method: "POST", path: widgets, contentType: jsonCT, body: []byte(`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w2"},"spec":{"replicas":9,"maxReplicas":3,"port":"x","extra":{"a":[1]}}}`)},
		{method: "PUT", path: widgets + "/w1/status", contentType: jsonCT, body: []byte(`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w1"},"status":{"replicas":-1}}`)},
		{method: "PATCH", path: widgets + "/w1/scale", contentType: mergeP, body: []byte(`{"spec":{"replicas":2}}`)},
		{method: "PATCH", path: widgets + "/w1/scale", contentType: jsonP, body: []byte(`[{"op":"replace","path":"/spec/replicas","value":"x"}]`)},
		{method: "PUT", path: widgets + "/w1/scale", contentType: jsonCT, body: []byte(`{"kind":"Scale","apiVersion":"autoscaling/v1","metadata":{"name":"w1"},"spec":{"replicas":3}}`)},
		{method: "PATCH", path: widgets + "/w1", contentType: smp, body: []byte(`{"spec":{"color":"blue"}}`)},
		{method: "PATCH", path: widgets + "/w1", query: "fieldManager=fuzz", contentType: apply, body: []byte("apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w1\nspec:\n  ports: [{name: a}, {name: a}]\n")},
		{method: "POST", path: crds, contentType: jsonCT, body: []byte(`{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"x.y"},"spec":{"group":"y","names":{"plural":"x","kind":"X"},"scope":"Nowhere","versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-validations":[{"rule":"self.a >"}]}}}]}}`)},
		{method: "PATCH", path: crds + "/widgets.example.com", contentType: mergeP, body: []byte(`{"spec":{"versions":null}}`)},
		{method: "DELETE", path: crds + "/widgets.example.com"},
		{method: "GET", path: "/openapi/v2"},
		// Methods and paths that are not served.
		{method: "OPTIONS", path: "/api/v1/nodes"}, {method: "HEAD", path: "/api/v1/nodes/n1"},
		{method: "GET", path: "/api/v1/namespaces/default/pods/p1/portforward"},
		{method: "POST", path: "/api/v1/nodes/n1/proxy/x"},
	}
}

// short cuts a response body for a failure message.
func short(s string) string {
	if len(s) > 512 {
		return s[:512] + "..."
	}
	return s
}

// serveOne serves one request in the test's process and returns the
// response and what serving it allocated.
func serveOne(h *Handler, method, path, query, contentType string, body []byte) (*httptest.ResponseRecorder, uint64, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), fuzzWatchTimeout)
	defer cancel()
	r, err := http.NewRequestWithContext(ctx, method, "http://cluster.example", bytes.NewReader(body))
	if err != nil {
		// Not a request an HTTP client can send (a method with spaces).
		return nil, 0, false
	}
	r.URL.Path, r.URL.RawQuery = path, query
	if contentType != "" {
		r.Header.Set("Content-Type", contentType)
	}
	w := httptest.NewRecorder()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	h.ServeHTTP(w, r)
	runtime.ReadMemStats(&after)
	return w, after.TotalAlloc - before.TotalAlloc, true
}

// FuzzHandler sends the workload API handler any path, verb, query
// (selectors, watch parameters), content type (every patch type) and body:
// it never panics, answers a code of the expected set, every error a
// metav1.Status, within fuzzRequestBound, and never allocates more than
// fuzzAllocBound for one request.
func FuzzHandler(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s.method, s.path, s.query, s.contentType, s.body)
	}
	var st *store.Store
	h, err := New(Options{StoreFor: func(*http.Request) (*store.Store, error) { return st, nil }})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, method, path, query, contentType string, body []byte) {
		if !strings.HasPrefix(path, "/") {
			path = "/" + path
		}
		st = fuzzStore(t)
		defer st.Close()
		started := time.Now()
		w, allocated, ok := serveOne(h, method, path, query, contentType, body)
		if !ok {
			return
		}
		if took := time.Since(started); took > fuzzRequestBound {
			t.Fatalf("%s %s?%s (%s, %d bytes): took %s", method, path, query, contentType, len(body), took)
		}
		code := w.Code
		// The one documented 500: exec, attach and the proxies of a pod
		// with a node reach for its kubelet, which there is none of.
		unreachableKubelet := code == http.StatusInternalServerError && strings.Contains(w.Body.String(), `"error dialing backend: `)
		if !allowedCodes[code] && !unreachableKubelet {
			t.Fatalf("%s %s?%s (%s): code %d: %s", method, path, query, contentType, code, short(w.Body.String()))
		}
		if allocated > fuzzAllocBound {
			t.Fatalf("%s %s?%s (%s, %d bytes): allocated %d MiB, more than %d MiB", method, path, query, contentType, len(body), allocated>>20, fuzzAllocBound>>20)
		}
		if code >= 400 && method != http.MethodHead {
			s := &metav1.Status{}
			if err := json.Unmarshal(w.Body.Bytes(), s); err != nil || s.Kind != "Status" || int(s.Code) != code {
				t.Fatalf("%s %s?%s: code %d without a Status (%v): %s", method, path, query, code, err, short(w.Body.String()))
			}
		}
	})
}

// A JSON patch that multiplies itself (issue 28: 1,000 copies of a 256 KiB
// value took 1.2 GiB before it was refused) is refused at kube-apiserver's
// bound on what copies may add, allocating little, and changes nothing. As
// kube-apiserver's, the answer is a 422 whose message does not say which
// bound.
func TestAJSONPatchThatMultipliesItselfIsRefusedWithinTheBound(t *testing.T) {
	g := NewWithT(t)
	st := fuzzStore(t)
	defer st.Close()
	h, err := New(Options{StoreFor: func(*http.Request) (*store.Store, error) { return st, nil }})
	g.Expect(err).NotTo(HaveOccurred())
	path := "/api/v1/namespaces/default/configmaps/big"

	w, allocated, ok := serveOne(h, http.MethodPatch, path, "", "application/json-patch+json", copyBomb(1000))
	g.Expect(ok).To(BeTrue())
	g.Expect(w.Code).To(Equal(http.StatusUnprocessableEntity), short(w.Body.String()))
	g.Expect(allocated).To(BeNumerically("<", 32<<20), "allocated %d MiB", allocated>>20)
	live, err := st.Get(store.Resource{Resource: "configmaps", Namespaced: true}, "default", "big")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(live.Object["data"]).To(HaveLen(1), "nothing of the refused patch is kept")

	// A few copies, within the bound, are applied as kube-apiserver would.
	w, _, _ = serveOne(h, http.MethodPatch, path, "", "application/json-patch+json", copyBomb(2))
	g.Expect(w.Code).To(Equal(http.StatusOK), short(w.Body.String()))

	// So many operations are refused before any is applied.
	ops := bytes.Repeat([]byte(`{"op":"test","path":"/data/a","value":"x"},`), maxJSONPatchOperations+1)
	w, _, _ = serveOne(h, http.MethodPatch, path, "", "application/json-patch+json", []byte("["+string(ops[:len(ops)-1])+"]"))
	g.Expect(w.Code).To(Equal(http.StatusRequestEntityTooLarge), short(w.Body.String()))
	g.Expect(w.Body.String()).To(ContainSubstring("The allowed maximum operations in a JSON patch is 10000"))
}
