package serving

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	runtimecatalog "sigs.k8s.io/cluster-api/api/runtime/catalog"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
)

// hooksPathPrefix starts every Runtime SDK path; anything else (admission
// webhooks, conversion) passes through the guard untouched.
var hooksPathPrefix = "/" + runtimehooksv1.GroupVersion.Group + "/"

// guard is the webhook.Server the runtime server embeds; it wraps every hook
// handler registered on it.
type guard struct {
	webhook.Server

	catalog           *runtimecatalog.Catalog
	maxBodyBytes      int64
	defaultTimeout    time.Duration
	requireClientCert bool
}

var _ webhook.Server = &guard{}

// Register implements webhook.Server.
func (g *guard) Register(path string, hook http.Handler) {
	if !strings.HasPrefix(path, hooksPathPrefix) {
		g.Server.Register(path, hook)
		return
	}
	gvh, ok := g.hookForPath(path)
	if !ok {
		// The upstream server only registers catalog hooks; refuse to serve
		// what cannot be validated rather than serve it unguarded.
		panic(fmt.Sprintf("runtime extension path %q matches no hook of the catalog", path))
	}
	g.Server.Register(path, &guardedHandler{guard: g, gvh: gvh, name: handlerName(path), next: hook})
}

// hookForPath finds the hook of /<group>/<version>/<hook>[/<handler name>].
func (g *guard) hookForPath(path string) (runtimecatalog.GroupVersionHook, bool) {
	for gvh := range g.catalog.AllKnownHooks() {
		base := runtimecatalog.GVHToPath(gvh, "")
		if path == base || strings.HasPrefix(path, base+"/") {
			return gvh, true
		}
	}
	return runtimecatalog.GroupVersionHook{}, false
}

func handlerName(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	if len(parts) == 4 {
		return parts[3]
	}
	return parts[len(parts)-1]
}

type guardedHandler struct {
	*guard
	gvh  runtimecatalog.GroupVersionHook
	name string
	next http.Handler
}

func (h *guardedHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		httpError(w, http.StatusMethodNotAllowed, "only POST is allowed on Runtime SDK paths")
		return
	}
	if h.requireClientCert && (r.TLS == nil || len(r.TLS.VerifiedChains) == 0) {
		httpError(w, http.StatusForbidden, "a client certificate signed by the configured client CA is required")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.maxBodyBytes))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			httpError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body is larger than %d bytes", h.maxBodyBytes))
			return
		}
		httpError(w, http.StatusBadRequest, "failed to read the request body")
		return
	}
	if msg := h.validateBody(body); msg != "" {
		httpError(w, http.StatusBadRequest, msg)
		return
	}
	timeout, err := h.timeout(r)
	if err != nil {
		httpError(w, http.StatusBadRequest, err.Error())
		return
	}
	parent := r.Context()
	ctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()
	r = r.Clone(ctx)
	r.Body = io.NopCloser(bytes.NewReader(body))

	rec := &recorder{header: http.Header{}, status: http.StatusOK}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			if p := recover(); p != nil {
				ctrl.LoggerFrom(ctx).Error(fmt.Errorf("panic: %v", p), "Runtime extension handler panicked", "handler", h.name, "hook", h.gvh.Hook)
				rec.reset()
				h.writeFailure(rec, fmt.Sprintf("handler %s failed with an internal error; see the extension's logs", h.name))
			}
		}()
		h.next.ServeHTTP(rec, r)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		if parent.Err() != nil {
			// The client went away; nobody reads an answer.
			return
		}
		// 504, not a Failure response: Cluster API then applies the
		// handler's failurePolicy, as it would had its own client timed out.
		httpError(w, http.StatusGatewayTimeout, fmt.Sprintf("handler %s did not answer within %s", h.name, timeout))
		return
	}
	out := rec.body.Bytes()
	if h.gvh.Hook == "Discovery" && rec.status == http.StatusOK {
		out = sortDiscovery(out)
	}
	for k, v := range rec.header {
		w.Header()[k] = v
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(rec.status)
	_, _ = w.Write(out)
}

// validateBody returns why body is not a request of the handler's hook, or "".
// It decodes into the typed request, as the upstream server will, so that a
// type mismatch is a 400 here rather than a Failure response later.
func (h *guardedHandler) validateBody(body []byte) string {
	var meta struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := json.Unmarshal(body, &meta); err != nil {
		return "request body is not a JSON object"
	}
	want, err := h.catalog.Request(h.gvh)
	if err != nil {
		return "hook is not in the catalog"
	}
	if meta.APIVersion != want.GroupVersion().String() || meta.Kind != want.Kind {
		return fmt.Sprintf("request must have apiVersion %s and kind %s", want.GroupVersion(), want.Kind)
	}
	req, err := h.catalog.NewRequest(h.gvh)
	if err != nil {
		return "hook is not in the catalog"
	}
	if err := json.Unmarshal(body, req); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			return fmt.Sprintf("request field %q must be of type %s", typeErr.Field, typeErr.Type)
		}
		return "request body does not decode as " + want.Kind
	}
	return ""
}

// timeout is the request's ?timeout= minus a margin that leaves time for
// the answer to travel back, or the default.
func (h *guardedHandler) timeout(r *http.Request) (time.Duration, error) {
	q := r.URL.Query().Get("timeout")
	if q == "" {
		return h.defaultTimeout, nil
	}
	d, err := time.ParseDuration(q)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("query parameter timeout must be a positive duration, got %q", q)
	}
	// Cluster API never asks for more than 30 s; a larger value would only
	// let a caller keep a handler (and its goroutine) busy for long.
	if d > MaxTimeout {
		return 0, fmt.Errorf("query parameter timeout must be at most %s, got %q", MaxTimeout, q)
	}
	margin := min(d/10, time.Second)
	return d - margin, nil
}

func (h *guardedHandler) writeFailure(w http.ResponseWriter, msg string) {
	obj, err := h.catalog.NewResponse(h.gvh)
	resp, ok := obj.(runtimehooksv1.ResponseObject)
	if err != nil || !ok {
		httpError(w, http.StatusInternalServerError, msg)
		return
	}
	gvk, _ := h.catalog.Response(h.gvh)
	resp.GetObjectKind().SetGroupVersionKind(gvk)
	resp.SetStatus(runtimehooksv1.ResponseStatusFailure)
	resp.SetMessage(msg)
	b, err := json.Marshal(resp)
	if err != nil {
		httpError(w, http.StatusInternalServerError, msg)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

// sortDiscovery orders the handlers of a discovery response by name, so
// that ExtensionConfig status does not change from one discovery to the next.
func sortDiscovery(body []byte) []byte {
	resp := &runtimehooksv1.DiscoveryResponse{}
	if err := json.Unmarshal(body, resp); err != nil {
		return body
	}
	slices.SortFunc(resp.Handlers, func(a, b runtimehooksv1.ExtensionHandler) int {
		return strings.Compare(a.Name, b.Name)
	})
	resp.SetGroupVersionKind(runtimehooksv1.GroupVersion.WithKind("DiscoveryResponse"))
	out, err := json.Marshal(resp)
	if err != nil {
		return body
	}
	return out
}

func httpError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = fmt.Fprintln(w, msg)
}

// recorder buffers a handler's answer so that a late or panicking handler
// never writes half an answer.
type recorder struct {
	header http.Header
	body   bytes.Buffer
	status int
}

func (r *recorder) Header() http.Header         { return r.header }
func (r *recorder) Write(b []byte) (int, error) { return r.body.Write(b) }
func (r *recorder) WriteHeader(status int)      { r.status = status }
func (r *recorder) reset() {
	r.header = http.Header{}
	r.body.Reset()
	r.status = http.StatusOK
}
