package apiserver

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
)

// minWatchTimeout is kube-apiserver's default --min-request-timeout: a watch
// without timeoutSeconds ends after between one and two times this.
const minWatchTimeout = 30 * time.Minute

// watch streams events as kube-apiserver does: one JSON WatchEvent per
// line, flushed as it happens, until the client goes, the timeout passes or
// the store ends the watch.
func (h *Handler) watch(w http.ResponseWriter, r *http.Request, req *request) {
	ls, fs, err := selectors(r, req.res)
	if err != nil {
		writeError(w, err)
		return
	}
	q := r.URL.Query()
	opts := store.WatchOptions{
		LabelSelector:   ls,
		FieldSelector:   fs,
		ResourceVersion: q.Get("resourceVersion"),
		AllowBookmarks:  q.Get("allowWatchBookmarks") == "true",
	}
	if v := q.Get("sendInitialEvents"); v != "" {
		send := v == "true"
		opts.SendInitialEvents = &send
	}
	timeout := minWatchTimeout + time.Duration(rand.Int64N(int64(minWatchTimeout)))
	if v := q.Get("timeoutSeconds"); v != "" {
		secs, err := strconv.ParseInt(v, 10, 64)
		if err != nil || secs < 0 {
			writeError(w, apierrors.NewBadRequest("invalid timeoutSeconds: "+v))
			return
		}
		if secs > 0 {
			timeout = time.Duration(secs) * time.Second
		}
	}

	flusher, ok := w.(http.Flusher)
	if !ok {
		writeError(w, apierrors.NewInternalError(errNoFlush))
		return
	}
	st, err := req.store.OpenStream(req.res.storeResource(), req.namespace, opts)
	if err != nil && !apierrors.IsResourceExpired(err) {
		writeLimitError(w, err)
		return
	}
	// No Content-Length: HTTP/1.1 streams it chunked, HTTP/2 as data frames.
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	if err != nil {
		// kube-apiserver's watch cache answers an expired resourceVersion
		// with an ERROR event, which client-go's reflectors relist after.
		_ = enc.Encode(map[string]any{"type": string(watch.Error), "object": statusOf(err)})
		flusher.Flush()
		return
	}
	flusher.Flush()

	// The events are written on this goroutine, the request's: a watch
	// costs no other (a cluster's clients hold a few open at all times).
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	shape := responseShape(r)
	st.Run(ctx, func(e watch.Event) error {
		if err := enc.Encode(map[string]any{"type": string(e.Type), "object": eventObject(req.res, shape, e)}); err != nil {
			return err
		}
		flusher.Flush()
		return nil
	})
}

// eventObject is the event's object in the shape the client asked for.
func eventObject(res *resource, shape shape, e watch.Event) any {
	obj, ok := e.Object.(*unstructured.Unstructured)
	if !ok {
		return e.Object
	}
	obj = inVersion(res, obj)
	switch {
	case shape == shapeMetadata:
		return partialObjectMetadata(obj)
	case e.Type == watch.Bookmark:
		// A bookmark carries only the resourceVersion (and annotations),
		// in the shape of the watched kind.
		return map[string]any{"apiVersion": res.gv.String(), "kind": res.kind, "metadata": obj.Object["metadata"]}
	case shape == shapeTable:
		return table(res, []*unstructured.Unstructured{obj}, obj.GetResourceVersion())
	}
	return obj.Object
}

type flushError string

func (e flushError) Error() string { return string(e) }

const errNoFlush = flushError("the response writer cannot stream a watch")
