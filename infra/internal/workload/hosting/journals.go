package hosting

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/journal"
	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
)

// Journals keeps clusters' objects where they outlive the process: a
// journal file per cluster (FileJournals), or Secrets of the management
// cluster (package secretjournal).
type Journals interface {
	// Open returns cluster's journal, the objects it kept and the last
	// resourceVersion it recorded. Without resume (a cluster served for
	// the first time) whatever an earlier cluster of the name left is
	// discarded and nothing is returned.
	Open(ctx context.Context, cluster types.NamespacedName, resume bool) (Journal, []store.Restored, uint64, error)
}

// Journal is one cluster's.
type Journal interface {
	store.Journal
	// Wait returns once every change recorded before it is kept: the
	// workload API answers a write only then.
	Wait(ctx context.Context) error
	// Close keeps what was recorded for the next Open.
	Close() error
	// Discard deletes it: the cluster is gone.
	Discard() error
}

// FileJournals keeps each cluster in journal.Path(Dir, namespace, name).
type FileJournals struct {
	Dir string
	Log logr.Logger
}

// Open implements Journals.
func (f FileJournals) Open(_ context.Context, key types.NamespacedName, resume bool) (Journal, []store.Restored, uint64, error) {
	path := journal.Path(f.Dir, key.Namespace, key.Name)
	if !resume {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, nil, 0, fmt.Errorf("failed to remove the stale journal of cluster %s: %w", key, err)
		}
	}
	j, restored, err := journal.Open(journal.Options{Path: path, Log: f.Log.WithValues("cluster", key.String())})
	if err != nil {
		return nil, nil, 0, err
	}
	return fileJournal{j}, restored, 0, nil
}

// fileJournal writes every change as it is made: nothing to wait for.
type fileJournal struct{ *journal.Journal }

func (fileJournal) Wait(context.Context) error { return nil }

// waitTimeout bounds how long a write's answer waits for its change to be
// kept.
const waitTimeout = 30 * time.Second

// durable answers a write only once the cluster's journal keeps it: the
// response is held until Wait returns, then sent; a change that could not
// be kept in time is a 504 Timeout Status (the change may still be kept,
// as with an etcd timeout). Reads, watches and upgraded connections
// (port-forward) pass through.
func (h *Hosting) durable(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		default:
			next.ServeHTTP(w, r)
			return
		}
		if r.Header.Get("Upgrade") != "" {
			next.ServeHTTP(w, r)
			return
		}
		c, err := h.clusterOf(r)
		if err != nil || c.journal == nil {
			next.ServeHTTP(w, r)
			return
		}
		held := &heldResponse{header: http.Header{}}
		next.ServeHTTP(held, r)
		ctx, cancel := context.WithTimeout(r.Context(), waitTimeout)
		defer cancel()
		if err := c.journal.Wait(ctx); err != nil {
			h.opts.Log.Error(err, "A workload write was not kept in time", "cluster", c.key.String())
			status := apierrors.NewTimeoutError(fmt.Sprintf("the change was made but is not yet kept: %v", err), 1).ErrStatus
			status.Kind, status.APIVersion = "Status", "v1"
			body, _ := json.Marshal(status)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(int(status.Code))
			_, _ = w.Write(body)
			return
		}
		for k, v := range held.header {
			w.Header()[k] = v
		}
		if held.code == 0 {
			held.code = http.StatusOK
		}
		w.WriteHeader(held.code)
		_, _ = w.Write(held.body.Bytes())
	})
}

// heldResponse is a response kept until it may be sent.
type heldResponse struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (r *heldResponse) Header() http.Header { return r.header }

func (r *heldResponse) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
}

func (r *heldResponse) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	return r.body.Write(b)
}
