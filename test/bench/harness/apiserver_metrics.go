package harness

import (
	"context"
	"fmt"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// APIServerWatches returns the watch requests kube-apiserver is serving now,
// by resource ("secrets", "clusters.cluster.x-k8s.io"), read from its own
// /metrics (apiserver_longrunning_requests with verb WATCH). It is the
// server's side of a client's informer count: subtract a reading taken
// before the client started.
func APIServerWatches(ctx context.Context, cfg *rest.Config) (map[string]float64, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("failed to create a clientset: %w", err)
	}
	stream, err := cs.RESTClient().Get().AbsPath("/metrics").Stream(ctx)
	if err != nil {
		return nil, fmt.Errorf("failed to read the apiserver's /metrics: %w", err)
	}
	defer stream.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(stream)
	if err != nil {
		return nil, fmt.Errorf("failed to parse the apiserver's /metrics: %w", err)
	}
	out := map[string]float64{}
	for _, m := range families["apiserver_longrunning_requests"].GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["verb"] != "WATCH" || m.GetGauge().GetValue() == 0 {
			continue
		}
		resource := labels["resource"]
		if g := labels["group"]; g != "" {
			resource += "." + g
		}
		out[resource] += m.GetGauge().GetValue()
	}
	return out, nil
}
