package harness

import (
	"context"
	"fmt"
	"strings"

	dto "github.com/prometheus/client_model/go"

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
	families, err := apiServerMetrics(ctx, cfg)
	if err != nil {
		return nil, err
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

// APIRequest is one kind of request as kube-apiserver counts it in
// apiserver_request_total: its verb (GET, LIST, WATCH, POST, PATCH, PUT,
// DELETE, APPLY...), resource with "/subresource" when there is one, the
// resource's group ("" for the core group) and the response code.
type APIRequest struct {
	Verb, Resource, Group, Code string
}

// String reads as "PATCH monolithmachines/status 200".
func (k APIRequest) String() string {
	return fmt.Sprintf("%s %s %s", k.Verb, k.ResourceName(), k.Code)
}

// ResourceName is the resource, qualified by its group outside the core
// group and Cluster API's (whose plural names are unambiguous here), so
// that core events and events.k8s.io events stay apart.
func (k APIRequest) ResourceName() string {
	switch {
	case k.Resource == "":
		return "(non-resource)"
	case k.Group == "" || strings.HasSuffix(k.Group, "cluster.x-k8s.io"):
		return k.Resource
	default:
		return k.Resource + "." + k.Group
	}
}

// APIServerRequests returns the requests kube-apiserver has served since it
// started, read from its own /metrics (apiserver_request_total). It counts
// every client's: subtract a reading taken before, and the requests of the
// clients that are not the one measured.
func APIServerRequests(ctx context.Context, cfg *rest.Config) (map[APIRequest]float64, error) {
	families, err := apiServerMetrics(ctx, cfg)
	if err != nil {
		return nil, err
	}
	out := map[APIRequest]float64{}
	for _, m := range families["apiserver_request_total"].GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		resource := labels["resource"]
		if sub := labels["subresource"]; sub != "" {
			resource += "/" + sub
		}
		out[APIRequest{Verb: labels["verb"], Resource: resource, Group: labels["group"], Code: labels["code"]}] += m.GetCounter().GetValue()
	}
	return out, nil
}

func apiServerMetrics(ctx context.Context, cfg *rest.Config) (map[string]*dto.MetricFamily, error) {
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
	return families, nil
}
