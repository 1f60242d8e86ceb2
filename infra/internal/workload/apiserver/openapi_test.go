package apiserver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	openapiv3 "github.com/google/gnostic-models/openapiv3"
	. "github.com/onsi/gomega"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
	"github.com/capi-monolith/capi-monolith/test/envtest"
)

// management is the kube-apiserver (envtest, with Cluster API's CRDs) the
// OpenAPI tests read the documents from, as the manager reads its
// management cluster's; started by the first test that needs it.
var management struct {
	once sync.Once
	env  *envtest.Environment
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if management.env != nil {
		if err := management.env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			if code == 0 {
				code = 1
			}
		}
	}
	os.Exit(code)
}

// managementOpenAPI is a KubeAPIServerOpenAPI of the management
// kube-apiserver as a service account with no role bound reads it: only
// what every authenticated user may do (system:discovery).
func managementOpenAPI(t *testing.T) *KubeAPIServerOpenAPI {
	t.Helper()
	management.once.Do(func() {
		management.env, management.err = envtest.Start(context.Background(), envtest.Options{})
	})
	if management.err != nil {
		t.Fatal(management.err)
	}
	cfg := rest.CopyConfig(management.env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:capi-monolith-system:capi-monolith-manager",
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:capi-monolith-system", "system:authenticated"},
	}
	source, err := NewKubeAPIServerOpenAPI(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return source
}

// httpClient speaks plain HTTP to the cluster, with its client certificate.
func (ts *testServer) httpClient(t *testing.T, cluster string) *http.Client {
	t.Helper()
	cfg := ts.restConfig(t, cluster)
	cert, err := tls.X509KeyPair(cfg.CertData, cfg.KeyData)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(cfg.CAData)
	return &http.Client{
		Transport: &http.Transport{TLSClientConfig: &tls.Config{
			ServerName: cluster, RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12,
		}},
		// Redirects are what is tested, not followed.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Timeout:       time.Minute,
	}
}

type response struct {
	code   int
	header http.Header
	body   []byte
}

func (ts *testServer) get(t *testing.T, c *http.Client, path string, header map[string]string) response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "https://"+ts.addr+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{code: resp.StatusCode, header: resp.Header, body: body}
}

func statusIn(g Gomega, body []byte) metav1.Status {
	var st metav1.Status
	g.Expect(json.Unmarshal(body, &st)).To(Succeed(), string(body))
	g.Expect(st.Kind).To(Equal("Status"))
	return st
}

// servedGroupVersionPaths are the group versions discovery lists, as
// OpenAPI v3 keys them.
func servedGroupVersionPaths(t *testing.T, g Gomega, ts *testServer) []string {
	groups, err := clientset(t, ts, "c1").Discovery().ServerGroups()
	g.Expect(err).NotTo(HaveOccurred())
	var paths []string
	for _, group := range groups.Groups {
		for _, v := range group.Versions {
			if group.Name == "" {
				paths = append(paths, "api/"+v.Version)
				continue
			}
			paths = append(paths, "apis/"+v.GroupVersion)
		}
	}
	sort.Strings(paths)
	return paths
}

func TestOpenAPIV3DescribesExactlyWhatIsServed(t *testing.T) {
	g := NewWithT(t)
	ts := startServerWith(t, Options{OpenAPI: managementOpenAPI(t)}, store.Options{}, "c1")
	cs := clientset(t, ts, "c1")

	// The index lists the group versions discovery lists, no other.
	index, err := cs.Discovery().OpenAPIV3().Paths()
	g.Expect(err).NotTo(HaveOccurred())
	var listed []string
	for p := range index {
		listed = append(listed, p)
	}
	sort.Strings(listed)
	served := servedGroupVersionPaths(t, g, ts)
	g.Expect(served).To(ContainElements("api/v1", "apis/apps/v1", "apis/policy/v1"))
	g.Expect(listed).To(Equal(served))

	// Each document holds the served paths of its group version and the
	// schemas they reference, nothing of the rest of kube-apiserver nor of
	// the management cluster's CRDs.
	for _, p := range listed {
		body, err := index[p].Schema("application/json")
		g.Expect(err).NotTo(HaveOccurred())
		var doc struct {
			Paths      map[string]any `json:"paths"`
			Components struct {
				Schemas map[string]struct {
					GVK []metav1.GroupVersionKind `json:"x-kubernetes-group-version-kind"`
				} `json:"schemas"`
			} `json:"components"`
		}
		g.Expect(json.Unmarshal(body, &doc)).To(Succeed())
		g.Expect(doc.Paths).NotTo(BeEmpty(), p)
		for path := range doc.Paths {
			g.Expect(path).To(HavePrefix("/"+p+"/"), "in %s", p)
			g.Expect(path).NotTo(ContainSubstring("/watch/"), "the legacy watch paths are not served")
		}
		for name, s := range doc.Components.Schemas {
			g.Expect(name).NotTo(ContainSubstring("x-k8s.io"), "no CRD of the management cluster")
			for _, gvk := range s.GVK {
				gvPath := "api/" + gvk.Version
				if gvk.Group != "" {
					gvPath = "apis/" + gvk.Group + "/" + gvk.Version
				}
				g.Expect(served).To(ContainElement(gvPath), "%s names %v", name, gvk)
			}
		}
		if p == "api/v1" {
			g.Expect(doc.Paths).To(HaveKey("/api/v1/nodes/{name}/status"))
			g.Expect(doc.Paths).To(HaveKey("/api/v1/namespaces/{namespace}/pods/{name}/eviction"))
			g.Expect(doc.Paths).To(HaveKey("/api/v1/pods"))
			g.Expect(doc.Paths).NotTo(HaveKey("/api/v1/namespaces/{namespace}/limitranges"))
			g.Expect(doc.Paths).NotTo(HaveKey("/api/v1/namespaces/{namespace}/pods/{name}/log"))
			g.Expect(doc.Components.Schemas).To(HaveKey("io.k8s.api.core.v1.Taint"))
			g.Expect(doc.Components.Schemas).To(HaveKey("io.k8s.api.policy.v1.Eviction"))
			g.Expect(doc.Components.Schemas).NotTo(HaveKey("io.k8s.api.core.v1.LimitRange"))
		}
	}
}

func TestOpenAPIV3CachingFollowsKubeAPIServer(t *testing.T) {
	g := NewWithT(t)
	ts := startServerWith(t, Options{OpenAPI: managementOpenAPI(t)}, store.Options{}, "c1")
	c := ts.httpClient(t, "c1")

	resp := ts.get(t, c, "/openapi/v3", nil)
	g.Expect(resp.code).To(Equal(http.StatusOK), string(resp.body))
	g.Expect(resp.header.Get("Content-Type")).To(Equal("application/json"))
	g.Expect(resp.header.Get("Etag")).NotTo(BeEmpty())
	var index openAPIV3Index
	g.Expect(json.Unmarshal(resp.body, &index)).To(Succeed())
	url := index.Paths["api/v1"].ServerRelativeURL
	g.Expect(url).To(MatchRegexp(`^/openapi/v3/api/v1\?hash=[0-9A-F]{128}$`))
	hash := strings.TrimPrefix(url, "/openapi/v3/api/v1?hash=")

	// The URL with its hash may be cached for good.
	resp = ts.get(t, c, url, map[string]string{"Accept": "application/json"})
	g.Expect(resp.code).To(Equal(http.StatusOK), string(resp.body))
	g.Expect(resp.header.Get("Content-Type")).To(Equal("application/json"))
	g.Expect(resp.header.Get("Etag")).To(Equal(`"` + hash + `"`))
	g.Expect(resp.header.Get("Cache-Control")).To(Equal("public, immutable"))
	expires, err := http.ParseTime(resp.header.Get("Expires"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(expires).To(BeTemporally(">", time.Now().AddDate(0, 11, 0)))
	g.Expect(resp.header.Values("Vary")).To(ContainElement("Accept"))
	jsonBody := resp.body

	// Without a hash, the same document, not to be kept.
	resp = ts.get(t, c, "/openapi/v3/api/v1", nil)
	g.Expect(resp.code).To(Equal(http.StatusOK))
	g.Expect(resp.body).To(Equal(jsonBody))
	g.Expect(resp.header.Get("Cache-Control")).To(BeEmpty())

	// A client holding the ETag gets 304.
	resp = ts.get(t, c, url, map[string]string{"If-None-Match": `"` + hash + `"`})
	g.Expect(resp.code).To(Equal(http.StatusNotModified))

	// An outdated hash is sent to the current one.
	resp = ts.get(t, c, "/openapi/v3/api/v1?hash=0123", nil)
	g.Expect(resp.code).To(Equal(http.StatusMovedPermanently))
	g.Expect(resp.header.Get("Location")).To(Equal(url))

	// Protobuf, as kube-apiserver also serves it, says the same.
	resp = ts.get(t, c, url, map[string]string{"Accept": mediaV3ProtoOlder})
	g.Expect(resp.code).To(Equal(http.StatusOK))
	g.Expect(resp.header.Get("Content-Type")).To(Equal(mediaV3Proto))
	pb := &openapiv3.Document{}
	g.Expect(proto.Unmarshal(resp.body, pb)).To(Succeed())
	var paths []string
	for _, p := range pb.GetPaths().GetPath() {
		paths = append(paths, p.GetName())
	}
	g.Expect(paths).To(ContainElement("/api/v1/nodes/{name}"))

	// What is not served is a Status.
	resp = ts.get(t, c, url, map[string]string{"Accept": "application/yaml"})
	g.Expect(resp.code).To(Equal(http.StatusNotAcceptable))
	g.Expect(statusIn(g, resp.body).Reason).To(Equal(metav1.StatusReasonNotAcceptable))
	for _, path := range []string{"/openapi/v3/apis/networking.k8s.io/v1", "/openapi/v3/apis/cluster.x-k8s.io/v1beta2", "/openapi/v3/apis/apps", "/openapi/v4"} {
		resp = ts.get(t, c, path, nil)
		g.Expect(resp.code).To(Equal(http.StatusNotFound), path)
		g.Expect(statusIn(g, resp.body).Reason).To(Equal(metav1.StatusReasonNotFound), path)
	}
}

func TestOpenAPIV2IsServedInProtobufAndJSON(t *testing.T) {
	g := NewWithT(t)
	ts := startServerWith(t, Options{OpenAPI: managementOpenAPI(t)}, store.Options{}, "c1")

	// client-go asks for protobuf.
	doc, err := clientset(t, ts, "c1").Discovery().OpenAPISchema()
	g.Expect(err).NotTo(HaveOccurred())
	var definitions, paths []string
	for _, d := range doc.GetDefinitions().GetAdditionalProperties() {
		definitions = append(definitions, d.GetName())
	}
	for _, p := range doc.GetPaths().GetPath() {
		paths = append(paths, p.GetName())
	}
	g.Expect(definitions).To(ContainElements("io.k8s.api.core.v1.Node", "io.k8s.api.apps.v1.Deployment", "io.k8s.api.coordination.v1.Lease"))
	g.Expect(definitions).NotTo(ContainElement("io.k8s.api.core.v1.LimitRange"))
	g.Expect(definitions).NotTo(ContainElement(ContainSubstring("x-k8s.io")), "no CRD of the management cluster")
	g.Expect(paths).To(ContainElements("/api/v1/nodes", "/apis/apps/v1/namespaces/{namespace}/deployments/{name}/status", "/apis/"))
	g.Expect(paths).NotTo(ContainElement(HavePrefix("/apis/networking.k8s.io/")))

	c := ts.httpClient(t, "c1")
	resp := ts.get(t, c, "/openapi/v2", map[string]string{"Accept": "application/json"})
	g.Expect(resp.code).To(Equal(http.StatusOK))
	g.Expect(resp.header.Get("Content-Type")).To(Equal("application/json"))
	etag := resp.header.Get("Etag")
	g.Expect(etag).To(MatchRegexp(`^"[0-9A-F]{128}"$`))
	var swagger struct {
		Swagger     string         `json:"swagger"`
		Definitions map[string]any `json:"definitions"`
	}
	g.Expect(json.Unmarshal(resp.body, &swagger)).To(Succeed())
	g.Expect(swagger.Swagger).To(Equal("2.0"))
	g.Expect(swagger.Definitions).To(HaveLen(len(definitions)))

	resp = ts.get(t, c, "/openapi/v2", map[string]string{"If-None-Match": etag})
	g.Expect(resp.code).To(Equal(http.StatusNotModified))
	resp = ts.get(t, c, "/openapi/v2", map[string]string{"Accept": "application/yaml"})
	g.Expect(resp.code).To(Equal(http.StatusNotAcceptable))
	g.Expect(statusIn(g, resp.body).Code).To(BeEquivalentTo(http.StatusNotAcceptable))

	resp = ts.get(t, c, "/", nil)
	g.Expect(resp.body).To(ContainSubstring(`"/openapi/v2"`))
}

func TestKubectlExplainsAppliesAndEditsWithOpenAPI(t *testing.T) {
	g := NewWithT(t)
	ts := startServerWith(t, Options{OpenAPI: managementOpenAPI(t)}, store.Options{}, "c1")
	cs := clientset(t, ts, "c1")
	ctx := context.Background()
	_, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w-0"}}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	_, kubectl := kubectlFor(t, ts, "c1")
	dir := t.TempDir()

	out, err := kubectl("explain", "node.spec.taints")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("KIND:       Node"))
	g.Expect(out).To(MatchRegexp(`FIELD:\s+taints <\[\]Taint>`))
	g.Expect(out).To(MatchRegexp(`effect\s+<string> -required-`))
	// The same from OpenAPI v2, as older kubectl explains.
	out, err = kubectl("explain", "node.spec.taints", "--output", "plaintext-openapiv2")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(MatchRegexp(`RESOURCE:\s+taints <\[\]Object>`))
	g.Expect(out).To(MatchRegexp(`effect\s+<string> -required-`))

	// Client-side apply: created, then changed by a three-way patch.
	manifest := filepath.Join(dir, "cm.yaml")
	writeManifest := func(value string) {
		g.Expect(os.WriteFile(manifest, []byte(`apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: default
data:
  mode: `+value+"\n"), 0o600)).To(Succeed())
	}
	writeManifest("one")
	out, err = kubectl("apply", "-f", manifest)
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("configmap/settings created"))
	writeManifest("two")
	out, err = kubectl("apply", "-f", manifest)
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("configmap/settings configured"))
	cm, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "settings", metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cm.Data).To(Equal(map[string]string{"mode": "two"}))
	g.Expect(cm.Annotations).To(HaveKey(corev1.LastAppliedConfigAnnotation))

	// Server-side apply takes the object over with a new value.
	writeManifest("three")
	out, err = kubectl("apply", "--server-side", "--force-conflicts", "-f", manifest)
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("configmap/settings serverside-applied"))
	cm, err = cs.CoreV1().ConfigMaps("default").Get(ctx, "settings", metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cm.Data).To(Equal(map[string]string{"mode": "three"}))

	// Validation: an unknown field is refused (strict, kubectl's default).
	bad := filepath.Join(dir, "bad.yaml")
	g.Expect(os.WriteFile(bad, []byte(`apiVersion: v1
kind: ConfigMap
metadata:
  name: bad
  namespace: default
color: blue
`), 0o600)).To(Succeed())
	out, err = kubectl("create", "-f", bad)
	g.Expect(err).To(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring(`unknown field "color"`))

	// kubectl edit, with an editor that adds a label.
	editor := filepath.Join(dir, "editor.sh")
	g.Expect(os.WriteFile(editor, []byte("#!/bin/sh\nsed -i 's/^  name: w-0$/  name: w-0\\n  labels:\\n    edited: \"yes\"/' \"$1\"\n"), 0o700)).To(Succeed()) //nolint:gosec // the editor must be executable
	t.Setenv("KUBE_EDITOR", editor)
	out, err = kubectl("edit", "node", "w-0")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("node/w-0 edited"))
	n, err := cs.CoreV1().Nodes().Get(ctx, "w-0", metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n.Labels).To(HaveKeyWithValue("edited", "yes"))
}

// gatedSource holds every read until released, and fails the first ones.
type gatedSource struct {
	OpenAPISource
	mu       sync.Mutex
	gate     chan struct{}
	failures int
	reads    int
}

func (s *gatedSource) wait(ctx context.Context) error {
	s.mu.Lock()
	gate := s.gate
	s.reads++
	fail := s.failures > 0
	if fail {
		s.failures--
	}
	s.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if fail {
		return errors.New("the management cluster is not reachable")
	}
	return nil
}

func (s *gatedSource) OpenAPIV2(ctx context.Context) ([]byte, error) {
	if err := s.wait(ctx); err != nil {
		return nil, err
	}
	return s.OpenAPISource.OpenAPIV2(ctx)
}

func (s *gatedSource) OpenAPIV3(ctx context.Context, gvs []string) (map[string][]byte, error) {
	if err := s.wait(ctx); err != nil {
		return nil, err
	}
	return s.OpenAPISource.OpenAPIV3(ctx, gvs)
}

func (s *gatedSource) readCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reads
}

func TestAnUnavailableOpenAPISourceIsA503AndIsRetried(t *testing.T) {
	g := NewWithT(t)
	source := &gatedSource{OpenAPISource: managementOpenAPI(t), gate: make(chan struct{}), failures: 1}
	ts := startServerWith(t, Options{OpenAPI: source}, store.Options{}, "c1")
	c := ts.httpClient(t, "c1")

	// While the source is read, the rest of the API answers.
	waiting := make(chan response, 1)
	go func() { waiting <- ts.get(t, c, "/openapi/v3", nil) }()
	g.Eventually(source.readCount, 10*time.Second).Should(Equal(1))
	resp := ts.get(t, c, "/api/v1/namespaces", nil)
	g.Expect(resp.code).To(Equal(http.StatusOK))
	close(source.gate)

	// The failed read is a Status, not a hang or an empty 200.
	resp = <-waiting
	g.Expect(resp.code).To(Equal(http.StatusServiceUnavailable))
	st := statusIn(g, resp.body)
	g.Expect(st.Reason).To(Equal(metav1.StatusReasonServiceUnavailable))
	g.Expect(st.Message).To(ContainSubstring("the management cluster is not reachable"))

	// A later request reads again, and what it read is kept.
	g.Eventually(func() int { return ts.get(t, c, "/openapi/v3/api/v1", nil).code }, 10*time.Second).Should(Equal(http.StatusOK))
	g.Expect(source.readCount()).To(Equal(2))
	g.Expect(ts.get(t, c, "/openapi/v3", nil).code).To(Equal(http.StatusOK))
	g.Expect(source.readCount()).To(Equal(2))
}

func TestOpenAPIIsNotFoundWithoutASource(t *testing.T) {
	g := NewWithT(t)
	ts := startServer(t, store.Options{}, "c1")
	c := ts.httpClient(t, "c1")
	for _, path := range []string{"/openapi/v2", "/openapi/v3", "/openapi/v3/api/v1"} {
		resp := ts.get(t, c, path, nil)
		g.Expect(resp.code).To(Equal(http.StatusNotFound), path)
		g.Expect(statusIn(g, resp.body).Reason).To(Equal(metav1.StatusReasonNotFound), path)
	}
}

func TestNegotiatePicksTheFirstAcceptedOffer(t *testing.T) {
	offers := []string{mediaJSON, mediaV2Proto, mediaV2ProtoOlder}
	tests := []struct {
		name, accept, want string
	}{
		{name: "no header is JSON", accept: "", want: mediaJSON},
		{name: "anything is JSON", accept: "*/*", want: mediaJSON},
		{name: "client-go's protobuf (older spelling) is itself", accept: mediaV2ProtoOlder, want: mediaV2ProtoOlder},
		{name: "the preferred of two is picked", accept: "application/json;q=0.5, " + mediaV2Proto, want: mediaV2Proto},
		{name: "equal preferences go in the header's order", accept: mediaV2Proto + ", application/json", want: mediaV2Proto},
		{name: "an application wildcard is JSON", accept: "application/*", want: mediaJSON},
		{name: "q=0 refuses", accept: "application/json;q=0", want: ""},
		{name: "YAML is not served", accept: "application/yaml", want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			NewWithT(t).Expect(negotiate(tt.accept, offers...)).To(Equal(tt.want))
		})
	}
}
