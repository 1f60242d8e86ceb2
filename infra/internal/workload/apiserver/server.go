package apiserver

import (
	"bufio"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/version"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
)

// DefaultKubernetesVersion is what /version reports unless Options say otherwise.
const DefaultKubernetesVersion = "v1.36.3"

// Options configure a Handler.
type Options struct {
	// StoreFor returns the store of the cluster a request is for. Required.
	// An apierrors StatusError it returns is the answer; any other error is
	// a 500.
	StoreFor func(*http.Request) (*store.Store, error)
	// KubernetesVersion is the gitVersion /version reports, e.g. v1.36.3.
	// Default DefaultKubernetesVersion.
	KubernetesVersion string
	// Log receives the requests answered with a server error (5xx), and at
	// V(4) every request. Default: discard.
	Log logr.Logger
	// PortForward connects pods/portforward streams to a pod's port (what
	// the kubelet does); kubectl port-forward, client-go's
	// tools/portforward and Cluster API's KubeadmControlPlane (its etcd
	// client) use it. Nil: pods/portforward is answered as by a
	// kube-apiserver whose kubelet is unreachable.
	PortForward PortForwardFunc
	// OpenAPI is where /openapi/v2 and /openapi/v3 come from, filtered to
	// what is served, read when first asked for and kept; while reading
	// fails they are 503. Nil: they are 404.
	OpenAPI OpenAPISource
}

// Handler serves the Kubernetes API of the clusters StoreFor resolves.
type Handler struct {
	opts    Options
	version version.Info

	fieldManagersMu sync.Mutex
	fieldManagers   map[fieldManagerKey]*managedfields.FieldManager
	typeConverter   managedfields.TypeConverter

	// openAPI is nil without Options.OpenAPI.
	openAPI *openAPI

	// tokenKey signs the service account tokens the Handler issues.
	tokenKey []byte

	// crds serves each cluster's CustomResourceDefinitions (crd_registry.go).
	crds crdRegistry
}

var _ http.Handler = &Handler{}

// New returns a Handler.
func New(opts Options) (*Handler, error) {
	if opts.StoreFor == nil {
		return nil, errors.New("apiserver: Options.StoreFor is required")
	}
	if opts.KubernetesVersion == "" {
		opts.KubernetesVersion = DefaultKubernetesVersion
	}
	if opts.Log.GetSink() == nil {
		opts.Log = logr.Discard()
	}
	h := &Handler{
		opts:          opts,
		version:       versionInfo(opts.KubernetesVersion),
		fieldManagers: map[fieldManagerKey]*managedfields.FieldManager{},
		typeConverter: newTypeConverter(),
	}
	if opts.OpenAPI != nil {
		h.openAPI = newOpenAPI(opts.OpenAPI)
	}
	h.tokenKey = make([]byte, 32)
	if _, err := rand.Read(h.tokenKey); err != nil {
		return nil, fmt.Errorf("apiserver: failed to make the token signing key: %w", err)
	}
	return h, nil
}

// request is one parsed resource request.
type request struct {
	res         *resource
	namespace   string
	name        string
	subresource string
	store       *store.Store
}

func (h *Handler) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	h.opts.Log.V(4).Info("Serving", "method", r.Method, "url", r.URL.String())
	w := &statusRecorder{ResponseWriter: rw}
	defer func() {
		// A bug answers 500 with a Status, not a cut connection.
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			h.opts.Log.Error(fmt.Errorf("%v", p), "Panic serving a request", "method", r.Method, "url", r.URL.String())
			if w.code == 0 {
				writeError(w, apierrors.NewInternalError(fmt.Errorf("the server failed to serve the request: %v", p)))
			}
		}
		if w.code >= 500 {
			h.opts.Log.Info("Answered with a server error", "method", r.Method, "url", r.URL.String(), "code", w.code)
		}
	}()
	h.serve(w, r)
}

// statusRecorder remembers the status code for the log; it streams (watches) as the writer it wraps does.
type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.code = code
	s.ResponseWriter.WriteHeader(code)
}

// Hijack hands over the connection for pods/portforward's upgrades.
func (s *statusRecorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return http.NewResponseController(s.ResponseWriter).Hijack()
}

func (s *statusRecorder) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (h *Handler) serve(w http.ResponseWriter, r *http.Request) {
	path := strings.Trim(r.URL.Path, "/")
	segs := strings.Split(path, "/")
	if segs[0] == "openapi" {
		h.serveOpenAPI(w, r, segs[1:])
		return
	}
	// Discovery documents are read-only.
	if r.Method != http.MethodGet && (len(segs) < 3 || segs[0] == "apis" && len(segs) < 4) {
		writeError(w, methodNotAllowed(r.Method, r.URL.Path))
		return
	}
	switch path {
	case "healthz", "livez", "readyz", "version":
	default:
		// Everything else depends on the cluster's resources, built-in and
		// custom.
		st, err := h.opts.StoreFor(r)
		if err != nil {
			writeError(w, err)
			return
		}
		h.serveCluster(w, r, st, path, segs)
		return
	}
	switch {
	case path == "healthz" || path == "livez" || path == "readyz":
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("ok"))
	case path == "version":
		writeJSON(w, http.StatusOK, h.versionOf(r))
	}
}

// serveCluster serves discovery and the resources of one cluster.
func (h *Handler) serveCluster(w http.ResponseWriter, r *http.Request, st *store.Store, path string, segs []string) {
	set, err := h.crds.set(st)
	if err != nil {
		writeError(w, err)
		return
	}
	switch {
	case path == "":
		paths := []string{"/api", "/api/v1", "/apis", "/healthz", "/livez", "/readyz", "/version"}
		if h.openAPI != nil {
			paths = append(paths, "/openapi/v2", "/openapi/v3")
		}
		for _, gv := range set.groupVersions() {
			if gv.Group != "" {
				paths = append(paths, "/apis/"+gv.Group, "/apis/"+gv.String())
			}
		}
		writeJSON(w, http.StatusOK, metav1.RootPaths{Paths: paths})
		return
	case path == "api" && wantsAggregated(r):
		writeAggregated(w, set, true)
		return
	case path == "apis" && wantsAggregated(r):
		writeAggregated(w, set, false)
		return
	case path == "api":
		writeJSON(w, http.StatusOK, &metav1.APIVersions{
			TypeMeta: metav1.TypeMeta{Kind: "APIVersions"},
			Versions: []string{"v1"},
			ServerAddressByClientCIDRs: []metav1.ServerAddressByClientCIDR{{
				ClientCIDR: "0.0.0.0/0", ServerAddress: r.Host,
			}},
		})
		return
	case path == "apis":
		writeJSON(w, http.StatusOK, set.apiGroupList())
		return
	}

	var gv schema.GroupVersion
	var rest []string
	switch {
	case segs[0] == "api" && len(segs) >= 2:
		gv, rest = schema.GroupVersion{Version: segs[1]}, segs[2:]
	case segs[0] == "apis" && len(segs) == 2:
		if g := set.apiGroup(segs[1]); g != nil {
			writeJSON(w, http.StatusOK, g)
			return
		}
		writeError(w, notFoundPath(r.URL.Path))
		return
	case segs[0] == "apis" && len(segs) >= 3:
		gv, rest = schema.GroupVersion{Group: segs[1], Version: segs[2]}, segs[3:]
	default:
		writeError(w, notFoundPath(r.URL.Path))
		return
	}
	if !set.servesGroupVersion(gv) {
		writeError(w, notFoundPath(r.URL.Path))
		return
	}
	if len(rest) == 0 {
		if r.Method != http.MethodGet {
			writeError(w, methodNotAllowed(r.Method, r.URL.Path))
			return
		}
		writeJSON(w, http.StatusOK, set.resourceList(gv))
		return
	}

	req, err := parseResourcePath(set, gv, rest)
	if err != nil {
		writeError(w, notFoundPath(r.URL.Path))
		return
	}
	if err := checkVerb(r, req); err != nil {
		writeError(w, err)
		return
	}
	req.store = st
	if h.serveBuiltin(w, r, req) {
		return
	}
	// Long-running requests (watches, port-forwards) are bounded apart,
	// as kube-apiserver exempts them from its in-flight limits.
	if !isWatchRequest(r) {
		done, err := req.store.StartRequest()
		if err != nil {
			writeLimitError(w, err)
			return
		}
		defer done()
	}
	h.crds.serve(r, req, func() { h.serveResource(w, r, req) })
}

// parseResourcePath reads {resource}[/{name}[/{sub}]] or
// namespaces/{ns}/{resource}[/{name}[/{sub}]].
func parseResourcePath(set *resourceSet, gv schema.GroupVersion, rest []string) (*request, error) {
	req := &request{}
	if rest[0] == "namespaces" && len(rest) >= 3 {
		if res := set.lookup(gv, rest[2]); res != nil && res.namespaced {
			req.res, req.namespace, rest = res, rest[1], rest[3:]
		}
	}
	if req.res == nil {
		res := set.lookup(gv, rest[0])
		if res == nil {
			return nil, errors.New("no such resource")
		}
		req.res, rest = res, rest[1:]
	}
	if len(rest) > 0 {
		req.name, rest = rest[0], rest[1:]
	}
	if len(rest) > 0 {
		req.subresource, rest = rest[0], rest[1:]
	}
	// Proxies take a path after the subresource.
	if len(rest) > 0 && req.subresource != "proxy" {
		return nil, errors.New("path too long")
	}
	if req.subresource != "" {
		if req.res.subresource(req.subresource) == nil {
			return nil, errors.New("no such subresource")
		}
		if req.res.namespaced && req.namespace == "" {
			return nil, errors.New("no namespace")
		}
	}
	return req, nil
}

func isWatchRequest(r *http.Request) bool {
	w := r.URL.Query().Get("watch")
	return r.Method == http.MethodGet && (w == "true" || w == "1")
}

func (h *Handler) serveResource(w http.ResponseWriter, r *http.Request, req *request) {
	isWatch := isWatchRequest(r)
	switch {
	case r.Method == http.MethodGet && req.name == "" && isWatch:
		h.watch(w, r, req)
	case r.Method == http.MethodGet && req.name == "":
		h.list(w, r, req)
	case r.Method == http.MethodGet && req.subresource != "eviction":
		h.get(w, r, req)
	case r.Method == http.MethodPost && req.name == "":
		h.create(w, r, req)
	case r.Method == http.MethodPost && req.subresource == "eviction":
		h.evict(w, r, req)
	case r.Method == http.MethodPut && req.name != "" && req.subresource != "eviction":
		h.update(w, r, req)
	case r.Method == http.MethodPatch && req.name != "" && req.subresource != "eviction":
		h.patch(w, r, req)
	case r.Method == http.MethodDelete && req.name != "" && req.subresource == "":
		h.delete(w, r, req)
	case r.Method == http.MethodDelete && req.name == "":
		h.deleteCollection(w, r, req)
	default:
		writeError(w, methodNotAllowed(r.Method, r.URL.Path))
	}
}

// writeLimitError answers a cluster's limit with its Retry-After header
// set from the Status, as kube-apiserver's API Priority and Fairness does.
func writeLimitError(w http.ResponseWriter, err error) {
	if secs, ok := apierrors.SuggestsClientDelay(err); ok && apierrors.IsTooManyRequests(err) {
		w.Header().Set("Retry-After", strconv.Itoa(secs))
	}
	writeError(w, err)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		writeError(w, apierrors.NewInternalError(fmt.Errorf("failed to encode the response: %w", err)))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(body)
}

// statusOf turns any error into the metav1.Status kube-apiserver would send.
func statusOf(err error) *metav1.Status {
	var api apierrors.APIStatus
	if errors.As(err, &api) {
		st := api.Status()
		st.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
		if st.Status == "" {
			st.Status = metav1.StatusFailure
		}
		return &st
	}
	st := apierrors.NewInternalError(err).Status()
	st.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	return &st
}

func writeError(w http.ResponseWriter, err error) {
	st := statusOf(err)
	code := int(st.Code)
	if code == 0 {
		code = http.StatusInternalServerError
	}
	writeJSON(w, code, st)
}

func notFoundPath(path string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusNotFound, Reason: metav1.StatusReasonNotFound,
		Message: fmt.Sprintf("the server could not find the requested resource (%s)", path),
		Details: &metav1.StatusDetails{},
	}}
}

func methodNotAllowed(method, path string) error {
	return apierrors.NewMethodNotSupported(schema.GroupResource{Resource: path}, method)
}
