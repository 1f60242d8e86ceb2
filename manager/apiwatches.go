package manager

import (
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// apiWatches is how many watch requests the process holds open against the
// API server, by resource. With one shared cache it is one per informer (per
// namespace when --namespace is set), however many modules read the type: the
// figure an operator compares when choosing one process over several.
var apiWatches = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "capi_monolith_api_watches_open",
	Help: "Watch requests this process holds open against the Kubernetes API server, by resource.",
}, []string{"resource"})

func init() {
	metrics.Registry.MustRegister(apiWatches)
}

// countWatches makes every client built from cfg count its open watches in
// apiWatches.
func countWatches(cfg *rest.Config) {
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return watchCounter{next: rt} })
}

type watchCounter struct{ next http.RoundTripper }

func (w watchCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Query().Get("watch") != "true" && req.URL.Query().Get("watch") != "1" {
		return w.next.RoundTrip(req)
	}
	g := apiWatches.WithLabelValues(watchedResource(req.URL.Path))
	g.Inc()
	resp, err := w.next.RoundTrip(req)
	if err != nil {
		g.Dec()
		return nil, err
	}
	// The watch is open until its body is closed, by the informer when it
	// ends the watch or by the transport when the server does.
	resp.Body = &watchBody{ReadCloser: resp.Body, done: g.Dec}
	return resp, nil
}

type watchBody struct {
	io.ReadCloser
	once sync.Once
	done func()
}

func (b *watchBody) Close() error {
	b.once.Do(b.done)
	return b.ReadCloser.Close()
}

// watchedResource is the resource of a list/watch path:
// /api/v1/namespaces/ns/secrets → secrets,
// /apis/cluster.x-k8s.io/v1beta2/clusters → clusters.cluster.x-k8s.io.
func watchedResource(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	var group string
	switch {
	case len(parts) >= 3 && parts[0] == "apis":
		group, parts = parts[1], parts[3:]
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	default:
		return "unknown"
	}
	if len(parts) >= 2 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	if len(parts) == 0 {
		return "unknown"
	}
	if group == "" {
		return parts[0]
	}
	return parts[0] + "." + group
}
