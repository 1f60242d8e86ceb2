package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"

	"github.com/capi-monolith/capi-monolith/dev/certs"
	"github.com/capi-monolith/capi-monolith/dev/ports"
	infrav1 "github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/runtimeext/handlers"
	"github.com/capi-monolith/capi-monolith/runtimeext/record"
	"github.com/capi-monolith/capi-monolith/runtimeext/serving"
)

// Config sizes one run.
type Config struct {
	Rate               float64
	Duration           time.Duration
	MachineDeployments int
	PatchCalls         int
	Runs               int
}

// DefaultConfig is what `make bench-hooks` runs.
func DefaultConfig() Config {
	return Config{Rate: 500, Duration: 10 * time.Second, MachineDeployments: 50, PatchCalls: 200, Runs: 3}
}

// Latencies summarises one series of calls.
type Latencies struct {
	Calls         int
	Rate          float64
	P50, P99, Max time.Duration
}

// Result is one run.
type Result struct {
	Lifecycle         Latencies
	Patches           Latencies
	PatchRequestBytes int
}

// Measure starts a server and measures both series.
func Measure(ctx context.Context, cfg Config) (Result, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	url, client, stop, err := startServer(ctx)
	if err != nil {
		return Result{}, err
	}
	defer stop()

	var res Result
	bcc, err := json.Marshal(beforeClusterCreate())
	if err != nil {
		return Result{}, err
	}
	// Warm up connections and code paths.
	for range 50 {
		if _, err := call(ctx, client, url+"/hooks.runtime.cluster.x-k8s.io/v1alpha1/beforeclustercreate/before-cluster-create?timeout=5s", bcc); err != nil {
			return Result{}, err
		}
	}
	if res.Lifecycle, err = fixedRate(ctx, client, url+"/hooks.runtime.cluster.x-k8s.io/v1alpha1/beforeclustercreate/before-cluster-create?timeout=5s", bcc, cfg.Rate, cfg.Duration); err != nil {
		return Result{}, err
	}
	gp, err := generatePatches(cfg.MachineDeployments)
	if err != nil {
		return Result{}, err
	}
	res.PatchRequestBytes = len(gp)
	if res.Patches, err = sequential(ctx, client, url+"/hooks.runtime.cluster.x-k8s.io/v1alpha1/generatepatches/generate-patches?timeout=10s", gp, cfg.PatchCalls); err != nil {
		return Result{}, err
	}
	return res, nil
}

func startServer(ctx context.Context) (string, *http.Client, func(), error) {
	ca, err := certs.NewCA("bench-hooks")
	if err != nil {
		return "", nil, nil, err
	}
	pair, err := ca.Serving()
	if err != nil {
		return "", nil, nil, err
	}
	dir, err := os.MkdirTemp("", "bench-hooks-")
	if err != nil {
		return "", nil, nil, err
	}
	if err := pair.Write(dir, ca); err != nil {
		return "", nil, nil, err
	}
	port, err := ports.One()
	if err != nil {
		return "", nil, nil, err
	}
	srv, err := serving.New(serving.Options{Webhook: webhook.Options{Host: "127.0.0.1", Port: port, CertDir: dir}})
	if err != nil {
		return "", nil, nil, err
	}
	// Metrics are recorded as in production; Events need an apiserver and
	// are left out.
	list, err := handlers.List(handlers.Options{Recorder: &record.Recorder{}})
	if err != nil {
		return "", nil, nil, err
	}
	if err := serving.AddHandlers(srv, list); err != nil {
		return "", nil, nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Start(sctx) }()
	stop := func() { cancel(); <-done; os.RemoveAll(dir) }
	deadline := time.Now().Add(10 * time.Second)
	for srv.StartedChecker()(nil) != nil {
		if time.Now().After(deadline) {
			stop()
			return "", nil, nil, errors.New("the server did not start within 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Like Cluster API's runtime client: TLS with the CA bundle, HTTP/2.
	tr := &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2:   true,
		MaxIdleConnsPerHost: 64,
	}
	return fmt.Sprintf("https://127.0.0.1:%d", port), &http.Client{Transport: tr, Timeout: 30 * time.Second}, stop, nil
}

func call(ctx context.Context, c *http.Client, url string, body []byte) (time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	d := time.Since(start)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	var r runtimehooksv1.CommonResponse
	if err := json.Unmarshal(b, &r); err != nil || r.Status != runtimehooksv1.ResponseStatusSuccess {
		return 0, fmt.Errorf("not a success: %s", b)
	}
	return d, nil
}

// fixedRate offers calls at rate for d (open loop) and waits for all.
func fixedRate(ctx context.Context, c *http.Client, url string, body []byte, rate float64, d time.Duration) (Latencies, error) {
	interval := time.Duration(float64(time.Second) / rate)
	n := int(d.Seconds() * rate)
	lat := make([]time.Duration, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		// Schedule against the start, so that a late tick does not lower
		// the offered rate.
		if wait := time.Until(start.Add(time.Duration(i) * interval)); wait > 0 {
			time.Sleep(wait)
		}
		wg.Go(func() { lat[i], errs[i] = call(ctx, c, url, body) })
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return Latencies{}, fmt.Errorf("lifecycle calls failed: %w", err)
	}
	l := summarize(lat)
	l.Rate = float64(n) / elapsed.Seconds()
	return l, nil
}

func sequential(ctx context.Context, c *http.Client, url string, body []byte, n int) (Latencies, error) {
	lat := make([]time.Duration, n)
	start := time.Now()
	for i := range n {
		d, err := call(ctx, c, url, body)
		if err != nil {
			return Latencies{}, fmt.Errorf("GeneratePatches failed: %w", err)
		}
		lat[i] = d
	}
	l := summarize(lat)
	l.Rate = float64(n) / time.Since(start).Seconds()
	return l, nil
}

func summarize(lat []time.Duration) Latencies {
	s := slices.Clone(lat)
	slices.Sort(s)
	pct := func(p float64) time.Duration { return s[min(len(s)-1, int(p*float64(len(s))))] }
	return Latencies{Calls: len(s), P50: pct(0.50), P99: pct(0.99), Max: s[len(s)-1]}
}

func beforeClusterCreate() *runtimehooksv1.BeforeClusterCreateRequest {
	req := &runtimehooksv1.BeforeClusterCreateRequest{Cluster: clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: "bench", UID: "u", Annotations: map[string]string{"example.com/a": "b"}},
		Spec: clusterv1.ClusterSpec{Topology: clusterv1.Topology{
			ClassRef: clusterv1.ClusterClassRef{Name: "monolith"}, Version: "v1.35.0",
			ControlPlane: clusterv1.ControlPlaneTopology{Replicas: ptr.To[int32](3)},
		}},
	}}
	req.SetGroupVersionKind(runtimehooksv1.GroupVersion.WithKind("BeforeClusterCreateRequest"))
	req.Settings = map[string]string{"retryAfterSeconds": "30"}
	return req
}

// generatePatches builds the request core sends for a topology of n machine
// deployments: the cluster's template, and per deployment its infrastructure
// and bootstrap templates (the latter of a kind we leave alone).
func generatePatches(n int) ([]byte, error) {
	vars := []runtimehooksv1.Variable{
		jsonVar("monolithBackend", "docker"),
		jsonVar("monolithNodeImage", "kindest/node:v1.35.0"),
		jsonVar("monolithLoadBalancerImage", "kindest/haproxy:v20230606-42a2262b"),
		jsonVar("builtin", map[string]any{"cluster": map[string]any{"name": "bench", "namespace": "bench", "topology": map[string]any{"version": "v1.35.0", "class": "monolith"}}}),
	}
	req := &runtimehooksv1.GeneratePatchesRequest{Variables: vars}
	req.SetGroupVersionKind(runtimehooksv1.GroupVersion.WithKind("GeneratePatchesRequest"))
	ct := &infrav1.MonolithClusterTemplate{}
	ct.SetGroupVersionKind(infrav1.GroupVersion.WithKind("MonolithClusterTemplate"))
	ct.Spec.Template.Spec.Backend.InMemory = &infrav1.InMemoryClusterBackend{}
	item := func(uid string, holderKind, holderName string, obj any, v ...runtimehooksv1.Variable) error {
		raw, err := json.Marshal(obj)
		if err != nil {
			return err
		}
		req.Items = append(req.Items, runtimehooksv1.GeneratePatchesRequestItem{
			UID:             types.UID(uid),
			HolderReference: runtimehooksv1.HolderReference{APIVersion: "cluster.x-k8s.io/v1beta2", Kind: holderKind, Namespace: "bench", Name: holderName, FieldPath: "spec.infrastructureRef"},
			Object:          runtime.RawExtension{Raw: raw},
			Variables:       v,
		})
		return nil
	}
	if err := item("cluster", "Cluster", "bench", ct); err != nil {
		return nil, err
	}
	for i := range n {
		mt := &infrav1.MonolithMachineTemplate{}
		mt.SetGroupVersionKind(infrav1.GroupVersion.WithKind("MonolithMachineTemplate"))
		mt.Spec.Template.Spec.Backend.InMemory = &infrav1.InMemoryMachineBackend{}
		mdVars := []runtimehooksv1.Variable{
			jsonVar("monolithAddressPools", []map[string]string{{"kind": "MonolithIPPool", "name": fmt.Sprintf("pool-%d", i%4)}}),
			jsonVar("builtin", map[string]any{"machineDeployment": map[string]any{"name": fmt.Sprintf("md-%d", i), "class": "workers", "replicas": 3}}),
		}
		if err := item(fmt.Sprintf("md-%d-infra", i), "MachineDeployment", fmt.Sprintf("md-%d", i), mt, mdVars...); err != nil {
			return nil, err
		}
		bt := map[string]any{"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2", "kind": "KubeadmConfigTemplate",
			"spec": map[string]any{"template": map[string]any{"spec": map[string]any{"joinConfiguration": map[string]any{"nodeRegistration": map[string]any{"kubeletExtraArgs": []any{}}}}}}}
		if err := item(fmt.Sprintf("md-%d-bootstrap", i), "MachineDeployment", fmt.Sprintf("md-%d", i), bt, mdVars...); err != nil {
			return nil, err
		}
	}
	return json.Marshal(req)
}

func jsonVar(name string, v any) runtimehooksv1.Variable {
	b, _ := json.Marshal(v)
	var out runtimehooksv1.Variable
	out.Name = name
	out.Value.Raw = b
	return out
}
