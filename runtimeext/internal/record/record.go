// Package record makes every runtime hook call observable: a Prometheus
// counter by hook and outcome, a latency histogram per hook, and (for calls
// about a Cluster) a Kubernetes Event on that Cluster whose reason is the
// hook's name.
package record

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"

	"github.com/capi-monolith/capi-monolith/runtimeext/internal/scope"
)

// Outcomes of a call, the values of the outcome label.
const (
	OutcomeSuccess = "success"
	OutcomeRetry   = "retry"
	OutcomeFailure = "failure"
)

var (
	// Calls counts hook calls by hook and outcome.
	Calls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "capi_monolith_runtimeext_hook_calls_total",
		Help: "Runtime hook calls answered, by hook and outcome (success, retry, failure).",
	}, []string{"hook", "outcome"})
	// Duration is the time a handler takes to answer, by hook.
	Duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "capi_monolith_runtimeext_hook_duration_seconds",
		Help:    "Time runtime hook handlers take to answer, by hook.",
		Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10},
	}, []string{"hook"})
)

func init() {
	metrics.Registry.MustRegister(Calls, Duration)
}

// Recorder records calls. A nil Events records metrics only.
type Recorder struct {
	Events events.EventRecorder
	// Scope are the Clusters Events are recorded on; calls about others
	// are counted only (another manager owns those Clusters).
	Scope scope.Scope
}

// Response is what a call's outcome is read from: any hook response, or
// its embedded CommonResponse / CommonRetryResponse.
type Response interface {
	GetStatus() runtimehooksv1.ResponseStatus
	GetMessage() string
}

// Outcome classifies a response.
func Outcome(resp Response) string {
	if resp.GetStatus() == runtimehooksv1.ResponseStatusFailure {
		return OutcomeFailure
	}
	if r, ok := resp.(interface{ GetRetryAfterSeconds() int32 }); ok && r.GetRetryAfterSeconds() > 0 {
		return OutcomeRetry
	}
	return OutcomeSuccess
}

// Call records one answered call of hook that started at start. cluster may
// be nil (no Event then).
func (r *Recorder) Call(hook string, cluster *clusterv1.Cluster, resp Response, start time.Time) {
	outcome := Outcome(resp)
	Calls.WithLabelValues(hook, outcome).Inc()
	Duration.WithLabelValues(hook).Observe(time.Since(start).Seconds())
	if r == nil || r.Events == nil || cluster == nil || cluster.Name == "" || !r.Scope.Covers(cluster) {
		return
	}
	eventType := corev1.EventTypeNormal
	if outcome == OutcomeFailure {
		eventType = corev1.EventTypeWarning
	}
	note := resp.GetMessage()
	if note == "" {
		note = "answered " + outcome
	}
	// The request's copy of the Cluster is enough to refer to it; Events
	// need apiVersion/kind, which requests may leave out.
	ref := cluster.DeepCopy()
	ref.SetGroupVersionKind(clusterv1.GroupVersion.WithKind("Cluster"))
	r.Events.Eventf(ref, nil, eventType, hook, "RuntimeHook", "%s", note)
}
