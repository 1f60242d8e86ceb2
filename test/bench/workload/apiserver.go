package main

import (
	"context"
	"fmt"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/capi-monolith/capi-monolith/test/bench/harness/process"
)

// apiServerRequests reads the management kube-apiserver's
// apiserver_request_total: every request it has answered, and the writes
// among them. Its own reads of /metrics count too, two per run.
func apiServerRequests(ctx context.Context, cfg *rest.Config) (all, writes float64, err error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return 0, 0, fmt.Errorf("failed to create a clientset: %w", err)
	}
	stream, err := cs.RESTClient().Get().AbsPath("/metrics").Stream(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("failed to read the apiserver's /metrics: %w", err)
	}
	defer stream.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(stream)
	if err != nil {
		return 0, 0, fmt.Errorf("failed to parse the apiserver's /metrics: %w", err)
	}
	m := process.Metrics(families)
	return m.Sum("apiserver_request_total"), writeRequests(m.ByLabel("apiserver_request_total", "verb")), nil
}

// writeRequests adds up the write verbs of requests counted by verb.
func writeRequests(byVerb map[string]float64) float64 {
	var sum float64
	for _, verb := range []string{"POST", "PUT", "PATCH", "DELETE", "APPLY", "DELETECOLLECTION"} {
		sum += byVerb[verb]
	}
	return sum
}
