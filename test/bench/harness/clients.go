package harness

import (
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Rate is a client's rate limit in client-go's terms, the same numbers as
// the manager's --kube-api-qps and --kube-api-burst.
//
// Beware when comparing figures: controller-runtime's client builds one
// REST client, hence one token bucket, per resource type, so a Rate bounds
// each kind's requests separately, not the client's total.
type Rate struct {
	QPS   float32
	Burst int
}

// Unthrottled turns client-go's client-side rate limiter off, for the
// clients that feed a benchmark and must not be its bottleneck.
var Unthrottled = Rate{QPS: -1}

// String returns "qps=200 burst=400" or "unthrottled".
func (r Rate) String() string {
	if r.QPS < 0 {
		return "unthrottled"
	}
	return "qps=" + strconv.FormatFloat(float64(r.QPS), 'g', -1, 32) + " burst=" + strconv.Itoa(r.Burst)
}

// Config returns a copy of cfg limited to r.
func (r Rate) Config(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst = r.QPS, r.Burst
	c.RateLimiter = nil
	return c
}

// NewClient returns an uncached client limited to rate, with its own
// connection to the apiserver.
func NewClient(cfg *rest.Config, scheme *runtime.Scheme, rate Rate) (client.WithWatch, error) {
	c, err := client.NewWithWatch(rate.Config(cfg), client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("failed to create a client (%s): %w", rate, err)
	}
	return c, nil
}
