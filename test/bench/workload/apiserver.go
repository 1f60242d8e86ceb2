package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/capi-monolith/capi-monolith/test/bench/harness/process"
)

// requestCounts are the management kube-apiserver's requests so far.
type requestCounts struct {
	// All and Writes count every request and the writes among them.
	All, Writes float64
	// ByKind counts them by verb and resource ("PATCH machines/status").
	ByKind map[string]float64
}

// apiServerRequests reads the management kube-apiserver's
// apiserver_request_total: every request it has answered, the writes among
// them, and both by verb and resource. Its own reads of /metrics count
// too, two per run.
func apiServerRequests(ctx context.Context, cfg *rest.Config) (requestCounts, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return requestCounts{}, fmt.Errorf("failed to create a clientset: %w", err)
	}
	stream, err := cs.RESTClient().Get().AbsPath("/metrics").Stream(ctx)
	if err != nil {
		return requestCounts{}, fmt.Errorf("failed to read the apiserver's /metrics: %w", err)
	}
	defer stream.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(stream)
	if err != nil {
		return requestCounts{}, fmt.Errorf("failed to parse the apiserver's /metrics: %w", err)
	}
	m := process.Metrics(families)
	byKind := map[string]float64{}
	for k, v := range m.ByLabels("apiserver_request_total", "verb", "resource", "subresource") {
		verb, resource, _ := strings.Cut(k, " ")
		byKind[verb+" "+strings.TrimSuffix(strings.ReplaceAll(resource, " ", "/"), "/")] += v
	}
	return requestCounts{
		All:    m.Sum("apiserver_request_total"),
		Writes: writeRequests(m.ByLabel("apiserver_request_total", "verb")),
		ByKind: byKind,
	}, nil
}

// since is what was counted after c0.
func (c requestCounts) since(c0 requestCounts) requestCounts {
	out := requestCounts{All: c.All - c0.All, Writes: c.Writes - c0.Writes, ByKind: map[string]float64{}}
	for k, v := range c.ByKind {
		if d := v - c0.ByKind[k]; d > 0 {
			out.ByKind[k] = d
		}
	}
	return out
}

// writeRequests adds up the write verbs of requests counted by verb.
func writeRequests(byVerb map[string]float64) float64 {
	var sum float64
	for _, verb := range []string{"POST", "PUT", "PATCH", "DELETE", "APPLY", "DELETECOLLECTION"} {
		sum += byVerb[verb]
	}
	return sum
}
