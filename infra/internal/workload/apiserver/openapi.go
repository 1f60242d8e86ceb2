package apiserver

import (
	"bytes"
	"context"
	"crypto/sha512"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	openapiv2 "github.com/google/gnostic-models/openapiv2"
	openapiv3 "github.com/google/gnostic-models/openapiv3"
	"google.golang.org/protobuf/proto"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

const (
	// openAPIFetchTimeout bounds one attempt at reading the source, which
	// requests for OpenAPI documents wait for.
	openAPIFetchTimeout = 30 * time.Second
	// openAPIRetry is how long after a failed attempt requests are answered
	// with its error rather than trying again.
	openAPIRetry = time.Second
)

// The media types kube-apiserver serves OpenAPI documents in; the one with
// "@" is an older spelling clients (client-go's OpenAPISchema) still ask
// for, answered with the newer one.
const (
	mediaJSON         = "application/json"
	mediaV2Proto      = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
	mediaV2ProtoOlder = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
	mediaV3Proto      = "application/com.github.proto-openapi.spec.v3.v1.0+protobuf"
	mediaV3ProtoOlder = "application/com.github.proto-openapi.spec.v3@v1.0+protobuf"
)

// openAPI serves /openapi/v2 and /openapi/v3 from an OpenAPISource, read
// on the first request for each and kept.
type openAPI struct {
	v2 lazy[*openAPIDoc]
	v3 lazy[*openAPIV3Docs]
}

// openAPIDoc is one served document: its JSON, its protobuf made on the
// first request for it, and the ETag of both (the Vary: Accept header
// keeps caches from mixing them up, as kube-apiserver does).
type openAPIDoc struct {
	json     []byte
	etag     string
	modified time.Time
	toProto  func([]byte) ([]byte, error)

	protoOnce sync.Once
	proto     []byte
	protoErr  error
}

// openAPIV3Docs are the v3 documents by group version path, and the index.
type openAPIV3Docs struct {
	index  *openAPIDoc
	byPath map[string]*openAPIDoc
}

func newOpenAPI(source OpenAPISource) *openAPI {
	return &openAPI{
		v2: lazy[*openAPIDoc]{load: func(ctx context.Context) (*openAPIDoc, error) { return loadOpenAPIV2(ctx, source) }},
		v3: lazy[*openAPIV3Docs]{load: func(ctx context.Context) (*openAPIV3Docs, error) { return loadOpenAPIV3(ctx, source) }},
	}
}

func newOpenAPIDoc(body []byte, toProto func([]byte) ([]byte, error)) *openAPIDoc {
	return &openAPIDoc{json: body, etag: fmt.Sprintf("%X", sha512.Sum512(body)), modified: time.Now(), toProto: toProto}
}

func (d *openAPIDoc) protobuf() ([]byte, error) {
	d.protoOnce.Do(func() { d.proto, d.protoErr = d.toProto(d.json) })
	return d.proto, d.protoErr
}

func loadOpenAPIV2(ctx context.Context, source OpenAPISource) (*openAPIDoc, error) {
	body, err := source.OpenAPIV2(ctx)
	if err != nil {
		return nil, err
	}
	filtered, err := filterOpenAPI(body, func(path string) bool {
		_, ok := servedOpenAPIPaths[path]
		return ok
	})
	if err != nil {
		return nil, fmt.Errorf("failed to filter the OpenAPI v2 document: %w", err)
	}
	return newOpenAPIDoc(filtered, v2Proto), nil
}

func loadOpenAPIV3(ctx context.Context, source OpenAPISource) (*openAPIV3Docs, error) {
	var wanted []string
	for _, gv := range builtinSet.groupVersions() {
		wanted = append(wanted, openAPIGroupVersionPath(gv))
	}
	bodies, err := source.OpenAPIV3(ctx, wanted)
	if err != nil {
		return nil, err
	}
	docs := &openAPIV3Docs{byPath: map[string]*openAPIDoc{}}
	index := openAPIV3Index{Paths: map[string]openAPIV3IndexEntry{}}
	for _, gvPath := range wanted {
		body, ok := bodies[gvPath]
		if !ok {
			continue
		}
		filtered, err := filterOpenAPI(body, func(path string) bool { return servedOpenAPIPaths[path] == gvPath })
		if err != nil {
			return nil, fmt.Errorf("failed to filter the OpenAPI v3 document of %s: %w", gvPath, err)
		}
		doc := newOpenAPIDoc(filtered, v3Proto)
		docs.byPath[gvPath] = doc
		index.Paths[gvPath] = openAPIV3IndexEntry{ServerRelativeURL: openAPIV3URL(gvPath, doc.etag)}
	}
	body, err := json.Marshal(index)
	if err != nil {
		return nil, fmt.Errorf("failed to encode the OpenAPI v3 index: %w", err)
	}
	docs.index = newOpenAPIDoc(body, nil)
	return docs, nil
}

// openAPIV3URL is where a v3 document is served, with the hash that makes
// the URL change with the document (kubectl caches it for good).
func openAPIV3URL(gvPath, etag string) string {
	return "/openapi/v3/" + gvPath + "?" + url.Values{"hash": {etag}}.Encode()
}

func v2Proto(body []byte) ([]byte, error) {
	doc, err := openapiv2.ParseDocument(body)
	if err != nil {
		return nil, fmt.Errorf("failed to parse the OpenAPI v2 document: %w", err)
	}
	return proto.Marshal(doc)
}

func v3Proto(body []byte) ([]byte, error) {
	doc, err := openapiv3.ParseDocument(body)
	if err != nil {
		return nil, fmt.Errorf("failed to parse the OpenAPI v3 document: %w", err)
	}
	return proto.Marshal(doc)
}

// serveOpenAPI answers /openapi/v2, /openapi/v3 and
// /openapi/v3/<group version path>; segs follow "openapi".
func (h *Handler) serveOpenAPI(w http.ResponseWriter, r *http.Request, segs []string) {
	if r.Method != http.MethodGet {
		writeError(w, methodNotAllowed(r.Method, r.URL.Path))
		return
	}
	if h.openAPI == nil || len(segs) == 0 {
		writeError(w, notFoundPath(r.URL.Path))
		return
	}
	switch {
	case len(segs) == 1 && segs[0] == "v2":
		doc, err := h.openAPI.v2.get(r.Context())
		if err == nil {
			doc, err = h.withCustomOpenAPIV2(r, doc)
		}
		if err != nil {
			h.openAPIUnavailable(w, r, err)
			return
		}
		serveOpenAPIDoc(w, r, doc, mediaV2Proto, mediaV2ProtoOlder)
	case len(segs) == 1 && segs[0] == "v3":
		docs, err := h.openAPI.v3.get(r.Context())
		if err == nil {
			docs, err = h.withCustomOpenAPIV3(r, docs)
		}
		if err != nil {
			h.openAPIUnavailable(w, r, err)
			return
		}
		// kube-apiserver answers the index in JSON whatever is asked for.
		w.Header().Set("Content-Type", mediaJSON)
		w.Header().Set("Etag", strconv.Quote(docs.index.etag))
		http.ServeContent(w, r, "", docs.index.modified, bytes.NewReader(docs.index.json))
	case segs[0] == "v3":
		gvPath := strings.Join(segs[1:], "/")
		// An unknown group version is 404 without asking the source.
		if !slices.ContainsFunc(h.openAPISet(r).groupVersions(), func(gv schema.GroupVersion) bool { return openAPIGroupVersionPath(gv) == gvPath }) {
			writeError(w, notFoundPath(r.URL.Path))
			return
		}
		docs, err := h.openAPI.v3.get(r.Context())
		if err == nil {
			docs, err = h.withCustomOpenAPIV3(r, docs)
		}
		if err != nil {
			h.openAPIUnavailable(w, r, err)
			return
		}
		doc, ok := docs.byPath[gvPath]
		if !ok {
			writeError(w, notFoundPath(r.URL.Path))
			return
		}
		if hash := r.URL.Query().Get("hash"); hash != "" {
			if hash != doc.etag {
				// An outdated URL (a client's cached index) is sent to the
				// current one.
				http.Redirect(w, r, openAPIV3URL(gvPath, doc.etag), http.StatusMovedPermanently)
				return
			}
			// The hash names this content: it may be cached for good.
			w.Header().Set("Cache-Control", "public, immutable")
			w.Header().Set("Expires", time.Now().AddDate(1, 0, 0).UTC().Format(http.TimeFormat))
		}
		serveOpenAPIDoc(w, r, doc, mediaV3Proto, mediaV3ProtoOlder)
	default:
		writeError(w, notFoundPath(r.URL.Path))
	}
}

// serveOpenAPIDoc answers with the JSON or the protobuf of doc, as the
// Accept header prefers; with neither acceptable, 406.
func serveOpenAPIDoc(w http.ResponseWriter, r *http.Request, doc *openAPIDoc, protoType, olderProtoType string) {
	w.Header().Add("Vary", "Accept")
	var body []byte
	switch negotiate(r.Header.Get("Accept"), mediaJSON, protoType, olderProtoType) {
	case mediaJSON:
		w.Header().Set("Content-Type", mediaJSON)
		body = doc.json
	case protoType, olderProtoType:
		pb, err := doc.protobuf()
		if err != nil {
			writeError(w, apierrors.NewInternalError(err))
			return
		}
		w.Header().Set("Content-Type", protoType)
		body = pb
	default:
		writeError(w, &apierrors.StatusError{ErrStatus: metav1.Status{
			Status: metav1.StatusFailure, Code: http.StatusNotAcceptable, Reason: metav1.StatusReasonNotAcceptable,
			Message: fmt.Sprintf("only the following media types are accepted: %s, %s", mediaJSON, protoType),
		}})
		return
	}
	w.Header().Set("Etag", strconv.Quote(doc.etag))
	// ServeContent answers If-None-Match with 304.
	http.ServeContent(w, r, "", doc.modified, bytes.NewReader(body))
}

func (h *Handler) openAPIUnavailable(w http.ResponseWriter, r *http.Request, err error) {
	h.opts.Log.Error(err, "OpenAPI documents are not available", "url", r.URL.String())
	w.Header().Set("Retry-After", "1")
	writeError(w, apierrors.NewServiceUnavailable(fmt.Sprintf("the OpenAPI documents are not available: %v", err)))
}

// negotiate returns the first of offers the Accept header accepts, in
// the header's order of preference (q, then as written), or "". No header
// accepts anything.
func negotiate(accept string, offers ...string) string {
	if strings.TrimSpace(accept) == "" {
		accept = "*/*"
	}
	type clause struct {
		mediaType string
		q         float64
	}
	var clauses []clause
	for _, part := range strings.Split(accept, ",") {
		params := strings.Split(part, ";")
		c := clause{mediaType: strings.ToLower(strings.TrimSpace(params[0])), q: 1}
		for _, p := range params[1:] {
			k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
			if strings.TrimSpace(k) == "q" {
				if q, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
					c.q = q
				}
			}
		}
		if c.q > 0 && c.mediaType != "" {
			clauses = append(clauses, c)
		}
	}
	sort.SliceStable(clauses, func(i, j int) bool { return clauses[i].q > clauses[j].q })
	for _, c := range clauses {
		typ, sub, _ := strings.Cut(c.mediaType, "/")
		for _, offer := range offers {
			offerType, offerSub, _ := strings.Cut(offer, "/")
			if (typ == "*" || typ == offerType) && (sub == "*" || sub == offerSub) {
				return offer
			}
		}
	}
	return ""
}

// lazy is a value loaded on first use, in the background: concurrent
// callers wait for one attempt (each at most until its own context ends),
// a failed attempt is retried by the first caller openAPIRetry after it,
// and callers in between get its error. Other requests never wait for it.
type lazy[T any] struct {
	load func(context.Context) (T, error)

	mu       sync.Mutex
	val      T
	loaded   bool
	attempt  chan struct{}
	err      error
	failedAt time.Time
}

func (l *lazy[T]) get(ctx context.Context) (T, error) {
	var zero T
	l.mu.Lock()
	if l.loaded {
		defer l.mu.Unlock()
		return l.val, nil
	}
	if l.attempt == nil {
		if l.err != nil && time.Since(l.failedAt) < openAPIRetry {
			defer l.mu.Unlock()
			return zero, l.err
		}
		l.attempt = make(chan struct{})
		go l.run(l.attempt)
	}
	attempt := l.attempt
	l.mu.Unlock()
	select {
	case <-attempt:
	case <-ctx.Done():
		return zero, ctx.Err()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.loaded {
		return l.val, nil
	}
	return zero, l.err
}

// run makes one attempt, bounded by openAPIFetchTimeout and not by any
// request's context: a client giving up does not fail it for the others.
func (l *lazy[T]) run(done chan struct{}) {
	ctx, cancel := context.WithTimeout(context.Background(), openAPIFetchTimeout)
	defer cancel()
	var val T
	var err error
	func() {
		// A bug in the load is an error for this attempt, not a crash of the process.
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("panic while loading: %v", p)
			}
		}()
		val, err = l.load(ctx)
	}()
	l.mu.Lock()
	if err == nil {
		l.val, l.loaded = val, true
	} else {
		l.err, l.failedAt = err, time.Now()
	}
	l.attempt = nil
	l.mu.Unlock()
	close(done)
}
