package harness

import (
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
)

// Requests counts the requests a client sends to the apiserver by verb and
// resource, and the time the apiserver took to answer them. It sits below
// client-go's rate limiter, so a request's time is the server's (and the
// network's), never the time it waited for a token.
type Requests struct {
	mu     sync.Mutex
	counts map[RequestKind]*RequestStats
}

// RequestKind is a verb on a resource, e.g. {"PATCH", "ipaddressclaims/status"}.
type RequestKind struct {
	// Verb is the HTTP method, or WATCH for a watch.
	Verb string
	// Resource is the plural resource, with "/subresource" when there is one.
	Resource string
}

// RequestStats are the requests of one kind.
type RequestStats struct {
	Count int
	// Total is the time from sending the request to reading the response
	// headers, summed.
	Total time.Duration
}

// NewRequests returns an empty counter.
func NewRequests() *Requests {
	return &Requests{counts: map[RequestKind]*RequestStats{}}
}

// Wrap returns a copy of cfg whose requests r counts.
func (r *Requests) Wrap(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper{next: rt, into: r}
	})
	return c
}

// Reset forgets every count.
func (r *Requests) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.counts = map[RequestKind]*RequestStats{}
}

// Snapshot returns the counts so far, sorted by count, largest first.
func (r *Requests) Snapshot() []RequestCount {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]RequestCount, 0, len(r.counts))
	for k, s := range r.counts {
		out = append(out, RequestCount{RequestKind: k, RequestStats: *s})
	}
	slices.SortFunc(out, func(a, b RequestCount) int {
		if a.Count != b.Count {
			return b.Count - a.Count
		}
		return strings.Compare(a.Verb+a.Resource, b.Verb+b.Resource)
	})
	return out
}

// RequestCount is one line of a Snapshot.
type RequestCount struct {
	RequestKind
	RequestStats
}

func (r *Requests) add(k RequestKind, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.counts[k]
	if !ok {
		s = &RequestStats{}
		r.counts[k] = s
	}
	s.Count++
	s.Total += d
}

type roundTripper struct {
	next http.RoundTripper
	into *Requests
}

func (rt roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	start := time.Now()
	resp, err := rt.next.RoundTrip(req)
	k := kindOf(req)
	if k.Verb != "WATCH" {
		rt.into.add(k, time.Since(start))
	} else {
		rt.into.add(k, 0)
	}
	return resp, err
}

// kindOf reads the resource from a Kubernetes API path:
// /api/v1/namespaces/ns/pods/name/status or
// /apis/group/version/namespaces/ns/resource/name/subresource.
func kindOf(req *http.Request) RequestKind {
	verb := req.Method
	if req.URL.Query().Get("watch") == "true" {
		verb = "WATCH"
	}
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return RequestKind{Verb: verb, Resource: req.URL.Path}
	}
	if len(parts) >= 2 && parts[0] == "namespaces" && len(parts) != 2 {
		parts = parts[2:] // a namespaced resource, not a namespace itself
	}
	switch len(parts) {
	case 0:
		return RequestKind{Verb: verb, Resource: "(discovery)"}
	case 1, 2:
		return RequestKind{Verb: verb, Resource: parts[0]}
	default:
		return RequestKind{Verb: verb, Resource: parts[0] + "/" + parts[2]}
	}
}
