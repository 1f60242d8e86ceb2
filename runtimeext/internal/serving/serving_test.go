package serving_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
	"sigs.k8s.io/cluster-api/exp/runtime/server"

	"github.com/capi-monolith/capi-monolith/dev/certs"
	"github.com/capi-monolith/capi-monolith/dev/ports"
	"github.com/capi-monolith/capi-monolith/runtimeext/internal/handlers"
	"github.com/capi-monolith/capi-monolith/runtimeext/internal/serving"
)

const hooksBase = "/hooks.runtime.cluster.x-k8s.io/v1alpha1/"

// running is a started server and what it takes to call it.
type running struct {
	srv     *server.Server
	url     string
	ca      *certs.CA
	certDir string
	client  *http.Client
}

// release unblocks the "slow" handler when its test ends; slowCancelled is
// closed once the slow handler saw its context cancelled.
var (
	release       = make(chan struct{})
	slowCancelled = make(chan struct{})
	slowOnce      sync.Once
)

func testHandlers() ([]server.ExtensionHandler, error) {
	list, err := handlers.List(handlers.Options{})
	if err != nil {
		return nil, err
	}
	fail := runtimehooksv1.FailurePolicyFail
	return append(list,
		server.ExtensionHandler{
			Name: "panics", Hook: runtimehooksv1.AfterControlPlaneInitialized, TimeoutSeconds: ptr.To[int32](5), FailurePolicy: &fail,
			HandlerFunc: func(context.Context, *runtimehooksv1.AfterControlPlaneInitializedRequest, *runtimehooksv1.AfterControlPlaneInitializedResponse) {
				panic("secret token 1234 leaked in a panic")
			},
		},
		server.ExtensionHandler{
			Name: "slow", Hook: runtimehooksv1.AfterControlPlaneInitialized, TimeoutSeconds: ptr.To[int32](1), FailurePolicy: &fail,
			HandlerFunc: func(ctx context.Context, _ *runtimehooksv1.AfterControlPlaneInitializedRequest, resp *runtimehooksv1.AfterControlPlaneInitializedResponse) {
				select {
				case <-ctx.Done():
					slowOnce.Do(func() { close(slowCancelled) })
				case <-release:
				}
				resp.SetStatus(runtimehooksv1.ResponseStatusSuccess)
			},
		},
	), nil
}

func start(t *testing.T, opts serving.Options, extra ...server.ExtensionHandler) *running {
	t.Helper()
	r, stop, err := launch(t.TempDir(), opts, extra...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	})
	return r
}

// launch starts a server with the module's handlers, the test handlers and
// an admission webhook of "another module", with certificates in dir.
func launch(dir string, opts serving.Options, extra ...server.ExtensionHandler) (*running, func() error, error) {
	ca, err := certs.NewCA("serving-test")
	if err != nil {
		return nil, nil, err
	}
	pair, err := ca.Serving()
	if err != nil {
		return nil, nil, err
	}
	if err := pair.Write(dir, ca); err != nil {
		return nil, nil, err
	}
	port, err := ports.One()
	if err != nil {
		return nil, nil, err
	}
	opts.Webhook = webhook.Options{Host: "127.0.0.1", Port: port, CertDir: dir}
	srv, err := serving.New(opts)
	if err != nil {
		return nil, nil, err
	}
	list, err := testHandlers()
	if err != nil {
		return nil, nil, err
	}
	if err := serving.AddHandlers(srv, append(list, extra...)); err != nil {
		return nil, nil, err
	}
	// An admission webhook of another module, on the same server.
	srv.Register("/validate-something", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "admission")
	}))

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	stop := func() error { cancel(); return <-done }
	deadline := time.Now().Add(10 * time.Second)
	for srv.StartedChecker()(nil) != nil {
		if time.Now().After(deadline) {
			return nil, nil, errors.Join(errors.New("the server did not start within 10s"), stop())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return &running{
		srv: srv, url: fmt.Sprintf("https://127.0.0.1:%d", port), ca: ca, certDir: dir,
		client: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12}}},
	}, stop, nil
}

func (r *running) post(t *testing.T, path string, body []byte) (*http.Response, []byte) {
	t.Helper()
	resp, err := r.client.Post(r.url+path, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func discoveryRequest(t *testing.T) []byte {
	req := &runtimehooksv1.DiscoveryRequest{}
	req.SetGroupVersionKind(runtimehooksv1.GroupVersion.WithKind("DiscoveryRequest"))
	return mustJSON(t, req)
}

func acpiRequest(t *testing.T) []byte {
	req := &runtimehooksv1.AfterControlPlaneInitializedRequest{}
	req.SetGroupVersionKind(runtimehooksv1.GroupVersion.WithKind("AfterControlPlaneInitializedRequest"))
	req.Cluster.Name = "c"
	return mustJSON(t, req)
}

func TestDiscoveryListsEveryCatalogHookSortedWithExplicitTimeoutAndPolicy(t *testing.T) {
	g := NewWithT(t)
	r := start(t, serving.Options{})
	resp, body := r.post(t, hooksBase+"discovery", discoveryRequest(t))
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK), string(body))
	got := &runtimehooksv1.DiscoveryResponse{}
	g.Expect(json.Unmarshal(body, got)).To(Succeed())
	g.Expect(got.Status).To(Equal(runtimehooksv1.ResponseStatusSuccess))

	names := make([]string, 0, len(got.Handlers))
	hooks := map[string]bool{}
	for _, h := range got.Handlers {
		names = append(names, h.Name)
		hooks[h.RequestHook.Hook] = true
		g.Expect(h.TimeoutSeconds).NotTo(BeNil(), h.Name)
		g.Expect(h.FailurePolicy).NotTo(BeNil(), h.Name)
	}
	g.Expect(slices.IsSorted(names)).To(BeTrue(), "handlers in a stable order: %v", names)

	cat, err := serving.Catalog()
	g.Expect(err).NotTo(HaveOccurred())
	for gvh := range cat.AllKnownHooks() {
		if gvh.Hook == "Discovery" {
			continue
		}
		g.Expect(hooks).To(HaveKey(gvh.Hook), "every hook of the catalog has a handler")
	}
	g.Expect(hooks).To(HaveLen(16))
}

func TestClientErrorsAreHTTPErrorsBeforeAnyHandlerRuns(t *testing.T) {
	r := start(t, serving.Options{MaxBodyBytes: 4096})
	bcc := hooksBase + "beforeclustercreate/before-cluster-create"

	t.Run("GET answers 405 naming POST", func(t *testing.T) {
		g := NewWithT(t)
		resp, err := r.client.Get(r.url + bcc)
		g.Expect(err).NotTo(HaveOccurred())
		resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(http.StatusMethodNotAllowed))
		g.Expect(resp.Header.Get("Allow")).To(Equal("POST"))
	})
	t.Run("an unknown hook path answers 404", func(t *testing.T) {
		g := NewWithT(t)
		resp, _ := r.post(t, hooksBase+"beforeclustercreate/no-such-handler", discoveryRequest(t))
		g.Expect(resp.StatusCode).To(Equal(http.StatusNotFound))
		resp, _ = r.post(t, "/hooks.runtime.cluster.x-k8s.io/v9/whatever", discoveryRequest(t))
		g.Expect(resp.StatusCode).To(Equal(http.StatusNotFound))
	})
	t.Run("malformed JSON answers 400", func(t *testing.T) {
		g := NewWithT(t)
		resp, body := r.post(t, bcc, []byte(`{"apiVersion": `))
		g.Expect(resp.StatusCode).To(Equal(http.StatusBadRequest))
		g.Expect(string(body)).To(ContainSubstring("not a JSON object"))
	})
	t.Run("a request of another hook answers 400 naming the expected kind", func(t *testing.T) {
		g := NewWithT(t)
		resp, body := r.post(t, bcc, discoveryRequest(t))
		g.Expect(resp.StatusCode).To(Equal(http.StatusBadRequest))
		g.Expect(string(body)).To(ContainSubstring("kind BeforeClusterCreateRequest"))
	})
	t.Run("a field of the wrong type answers 400 naming the field", func(t *testing.T) {
		g := NewWithT(t)
		resp, body := r.post(t, bcc, []byte(`{"apiVersion":"hooks.runtime.cluster.x-k8s.io/v1alpha1","kind":"BeforeClusterCreateRequest","cluster":7}`))
		g.Expect(resp.StatusCode).To(Equal(http.StatusBadRequest))
		g.Expect(string(body)).To(ContainSubstring(`"cluster"`))
	})
	t.Run("an oversized body answers 413", func(t *testing.T) {
		g := NewWithT(t)
		big := fmt.Sprintf(`{"apiVersion":"hooks.runtime.cluster.x-k8s.io/v1alpha1","kind":"BeforeClusterCreateRequest","settings":{"x":%q}}`, strings.Repeat("a", 8192))
		resp, _ := r.post(t, bcc, []byte(big))
		g.Expect(resp.StatusCode).To(Equal(http.StatusRequestEntityTooLarge))
	})
	t.Run("a bad timeout query answers 400", func(t *testing.T) {
		g := NewWithT(t)
		resp, body := r.post(t, bcc+"?timeout=soon", acpiRequestAs(t, "BeforeClusterCreateRequest"))
		g.Expect(resp.StatusCode).To(Equal(http.StatusBadRequest), string(body))
		g.Expect(string(body)).To(ContainSubstring("timeout"))
	})
	t.Run("a timeout query beyond the maximum answers 400 naming it", func(t *testing.T) {
		g := NewWithT(t)
		resp, body := r.post(t, bcc+"?timeout=1h", acpiRequestAs(t, "BeforeClusterCreateRequest"))
		g.Expect(resp.StatusCode).To(Equal(http.StatusBadRequest), string(body))
		g.Expect(string(body)).To(ContainSubstring("at most 30s"))
	})
	t.Run("plain HTTP is refused", func(t *testing.T) {
		g := NewWithT(t)
		resp, err := http.Post(strings.Replace(r.url, "https://", "http://", 1)+bcc, "application/json", bytes.NewReader(acpiRequestAs(t, "BeforeClusterCreateRequest")))
		g.Expect(err).NotTo(HaveOccurred())
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(http.StatusBadRequest))
		g.Expect(string(body)).To(ContainSubstring("HTTPS"))
	})
	t.Run("a valid request answers 200", func(t *testing.T) {
		g := NewWithT(t)
		resp, body := r.post(t, bcc+"?timeout=10s", acpiRequestAs(t, "BeforeClusterCreateRequest"))
		g.Expect(resp.StatusCode).To(Equal(http.StatusOK), string(body))
		g.Expect(string(body)).To(ContainSubstring(`"status":"Success"`))
	})
}

func acpiRequestAs(t *testing.T, kind string) []byte {
	var m map[string]any
	if err := json.Unmarshal(acpiRequest(t), &m); err != nil {
		t.Fatal(err)
	}
	m["kind"] = kind
	return mustJSON(t, m)
}

func TestAPanickingHandlerAnswersAFailureWithoutItsSecrets(t *testing.T) {
	g := NewWithT(t)
	r := start(t, serving.Options{})
	resp, body := r.post(t, hooksBase+"aftercontrolplaneinitialized/panics", acpiRequest(t))
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
	got := &runtimehooksv1.AfterControlPlaneInitializedResponse{}
	g.Expect(json.Unmarshal(body, got)).To(Succeed())
	g.Expect(got.Status).To(Equal(runtimehooksv1.ResponseStatusFailure))
	g.Expect(got.Message).To(Equal("handler panics failed with an internal error; see the extension's logs"))
	g.Expect(string(body)).NotTo(ContainSubstring("1234"))

	// The server keeps serving.
	resp, _ = r.post(t, hooksBase+"discovery", discoveryRequest(t))
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
}

func TestASlowHandlerAnswers504BeforeTheCallersTimeout(t *testing.T) {
	g := NewWithT(t)
	t.Cleanup(func() { close(release) })
	r := start(t, serving.Options{})
	resp, body := r.post(t, hooksBase+"aftercontrolplaneinitialized/slow?timeout=1s", acpiRequest(t))
	// 504 is a call error for Cluster API, so the handler's failurePolicy
	// decides; a Failure response would fail the call whatever the policy.
	// The deadline is the caller's 1s minus the margin: the answer leaves
	// before the caller gives up.
	g.Expect(resp.StatusCode).To(Equal(http.StatusGatewayTimeout))
	g.Expect(string(body)).To(ContainSubstring("handler slow did not answer within 900ms"))
	// The handler's context is cancelled with the answer: work it does
	// with it (API reads) stops instead of running on unbounded.
	g.Eventually(slowCancelled).WithTimeout(5 * time.Second).Should(BeClosed())
}

func TestAdmissionWebhooksShareThePortAndAreNotGuarded(t *testing.T) {
	g := NewWithT(t)
	r := start(t, serving.Options{})
	resp, err := r.client.Get(r.url + "/validate-something")
	g.Expect(err).NotTo(HaveOccurred())
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
	g.Expect(string(body)).To(Equal("admission"))
}

func TestMTLSRejectsHookCallsWithoutATrustedClientCertificate(t *testing.T) {
	g := NewWithT(t)
	clientCA, err := certs.NewCA("clients")
	g.Expect(err).NotTo(HaveOccurred())
	caFile := filepath.Join(t.TempDir(), "client-ca.crt")
	g.Expect(os.WriteFile(caFile, clientCA.PEM, 0o600)).To(Succeed())
	r := start(t, serving.Options{ClientCAFile: caFile})
	path := hooksBase + "discovery"

	// No certificate: the TLS handshake passes, the hook path refuses.
	resp, body := r.post(t, path, discoveryRequest(t))
	g.Expect(resp.StatusCode).To(Equal(http.StatusForbidden), string(body))

	// A certificate of another CA: refused in the TLS handshake.
	otherCA, err := certs.NewCA("others")
	g.Expect(err).NotTo(HaveOccurred())
	other, err := otherCA.Client("intruder")
	g.Expect(err).NotTo(HaveOccurred())
	_, err = clientWith(r, other).Post(r.url+path, "application/json", bytes.NewReader(discoveryRequest(t)))
	g.Expect(err).To(HaveOccurred())

	// A certificate of the client CA: served.
	good, err := clientCA.Client("cluster-api")
	g.Expect(err).NotTo(HaveOccurred())
	resp, err = clientWith(r, good).Post(r.url+path, "application/json", bytes.NewReader(discoveryRequest(t)))
	g.Expect(err).NotTo(HaveOccurred())
	resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK))

	// Admission webhooks stay reachable by an apiserver without one.
	resp, err = r.client.Get(r.url + "/validate-something")
	g.Expect(err).NotTo(HaveOccurred())
	resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
}

func clientWith(r *running, p certs.Pair) *http.Client {
	cert, err := p.TLS()
	if err != nil {
		panic(err)
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: r.ca.Pool(), MinVersion: tls.VersionTLS12,
		// Always present the certificate, even one the server's CA list
		// does not name, as an intruder would.
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil },
	}}}
}

func TestARotatedServingCertificateIsUsedByNewConnectionsWithoutRestart(t *testing.T) {
	g := NewWithT(t)
	r := start(t, serving.Options{})
	newCA, err := certs.NewCA("rotated")
	g.Expect(err).NotTo(HaveOccurred())
	pair, err := newCA.Serving()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pair.Write(r.certDir, newCA)).To(Succeed())

	g.Eventually(func() error {
		c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
			DisableKeepAlives: true,
			TLSClientConfig:   &tls.Config{RootCAs: newCA.Pool(), MinVersion: tls.VersionTLS12},
		}}
		resp, err := c.Post(r.url+hooksBase+"discovery", "application/json", bytes.NewReader(discoveryRequest(t)))
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	}).WithTimeout(30*time.Second).WithPolling(200*time.Millisecond).Should(Succeed(), "new connections trust the new CA")
}

func TestAddHandlersRejectsBadNamesAndImplicitDefaults(t *testing.T) {
	g := NewWithT(t)
	srv, err := serving.New(serving.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	fail := runtimehooksv1.FailurePolicyFail
	noop := func(context.Context, *runtimehooksv1.BeforeClusterCreateRequest, *runtimehooksv1.BeforeClusterCreateResponse) {
	}
	err = serving.AddHandlers(srv, []server.ExtensionHandler{
		{Name: "Not_A_Label", Hook: runtimehooksv1.BeforeClusterCreate, HandlerFunc: noop, TimeoutSeconds: ptr.To[int32](5), FailurePolicy: &fail},
		{Name: "no-timeout", Hook: runtimehooksv1.BeforeClusterCreate, HandlerFunc: noop, FailurePolicy: &fail},
		{Name: "no-policy", Hook: runtimehooksv1.BeforeClusterCreate, HandlerFunc: noop, TimeoutSeconds: ptr.To[int32](5)},
		{Name: "ok", Hook: runtimehooksv1.BeforeClusterCreate, HandlerFunc: noop, TimeoutSeconds: ptr.To[int32](5), FailurePolicy: &fail},
		{Name: "ok", Hook: runtimehooksv1.BeforeClusterCreate, HandlerFunc: noop, TimeoutSeconds: ptr.To[int32](5), FailurePolicy: &fail},
	})
	g.Expect(err).To(MatchError(ContainSubstring(`"Not_A_Label" of hook BeforeClusterCreate: name is not a DNS-1123 label`)))
	g.Expect(err).To(MatchError(ContainSubstring(`"no-timeout" of hook BeforeClusterCreate: timeoutSeconds must be set`)))
	g.Expect(err).To(MatchError(ContainSubstring(`"no-policy" of hook BeforeClusterCreate: failurePolicy must be set`)))
	g.Expect(err).To(MatchError(ContainSubstring(`"ok" of hook BeforeClusterCreate: name used twice`)))
}

func TestNewFailsOnAnUnreadableClientCA(t *testing.T) {
	g := NewWithT(t)
	_, err := serving.New(serving.Options{ClientCAFile: filepath.Join(t.TempDir(), "missing.crt")})
	g.Expect(err).To(MatchError(ContainSubstring("failed to read the client CA file")))
	empty := filepath.Join(t.TempDir(), "empty.crt")
	g.Expect(os.WriteFile(empty, []byte("not pem"), 0o600)).To(Succeed())
	_, err = serving.New(serving.Options{ClientCAFile: empty})
	g.Expect(err).To(MatchError(ContainSubstring("no PEM certificate")))
}
