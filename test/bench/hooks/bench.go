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

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"

	"github.com/capi-monolith/capi-monolith/dev/certs"
	"github.com/capi-monolith/capi-monolith/dev/ports"
	infrav1 "github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/manager"
	"github.com/capi-monolith/capi-monolith/runtimeext"
	"github.com/capi-monolith/capi-monolith/test/bench/harness"
)

// benchNamespace is the namespace of the Cluster the requests name.
const benchNamespace = "bench"

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
	srv, stop, err := startServer(ctx)
	if err != nil {
		return Result{}, err
	}
	defer stop()
	url, client := srv.url, srv.client

	var res Result
	bcc, err := json.Marshal(beforeClusterCreate(srv.cluster))
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

// server is a running runtime extension.
type server struct {
	url    string
	client *http.Client
	// cluster is the stored Cluster the requests are about.
	cluster *clusterv1.Cluster
}

// startServer starts what users run: an apiserver (envtest, with the ipam
// module's pool kinds so that the capacity gate reads real, empty pools), and
// the binary's manager with the runtimeext module alone, its webhook server
// on loopback with a serving certificate of a fresh CA. The requests'
// Cluster is stored, as the hooks act only on stored Clusters. The client
// trusts the CA, as Cluster API's runtime client does.
func startServer(ctx context.Context) (*server, func(), error) {
	env, err := harness.StartEnvironment(ctx, harness.EnvOptions{CRDDirs: []string{"manifests/ipam/crd"}})
	if err != nil {
		return nil, nil, fmt.Errorf("failed to start the apiserver: %w", err)
	}
	var cleanups []func()
	cleanup := func() {
		for _, c := range slices.Backward(cleanups) {
			c()
		}
	}
	cleanups = append(cleanups, func() { _ = env.Stop() })
	fail := func(err error) (*server, func(), error) {
		cleanup()
		return nil, nil, err
	}
	// The namespace of the Cluster the requests name, so that its Events
	// are stored as in production.
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: benchNamespace}}); err != nil {
		return fail(fmt.Errorf("failed to create namespace %s: %w", benchNamespace, err))
	}
	cluster := benchCluster()
	if err := env.Client.Create(ctx, cluster); err != nil {
		return fail(fmt.Errorf("failed to create the Cluster the requests name: %w", err))
	}
	ca, err := certs.NewCA("bench-hooks")
	if err != nil {
		return fail(err)
	}
	pair, err := ca.Serving()
	if err != nil {
		return fail(err)
	}
	dir, err := os.MkdirTemp("", "bench-hooks-")
	if err != nil {
		return fail(err)
	}
	cleanups = append(cleanups, func() { _ = os.RemoveAll(dir) })
	if err := pair.Write(dir, ca); err != nil {
		return fail(err)
	}
	port, err := ports.One()
	if err != nil {
		return fail(err)
	}
	opts := manager.DefaultOptions(runtimeext.Name)
	opts.EnableModules = []string{runtimeext.Name}
	opts.HealthAddr = "0"
	opts.Diagnostics.DiagnosticsAddress = "0"
	opts.Diagnostics.InsecureDiagnostics = true
	opts.WebhookHost = "127.0.0.1"
	opts.WebhookPort = port
	opts.WebhookCertDir = dir
	mgr, err := manager.New(ctx, env.Config, opts, runtimeext.New(runtimeext.DefaultOptions()))
	if err != nil {
		return fail(fmt.Errorf("failed to build the manager: %w", err))
	}
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	cleanups = append(cleanups, func() { cancel(); <-done })

	// Like Cluster API's runtime client: TLS with the CA bundle, HTTP/2.
	tr := &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2:   true,
		MaxIdleConnsPerHost: 64,
	}
	c := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	url := fmt.Sprintf("https://127.0.0.1:%d", port)
	if err := waitForDiscovery(ctx, c, url, done); err != nil {
		return fail(err)
	}
	return &server{url: url, client: c, cluster: cluster}, cleanup, nil
}

// waitForDiscovery polls the Runtime SDK discovery endpoint until it
// answers, the manager stops, or 60 s pass.
func waitForDiscovery(ctx context.Context, c *http.Client, url string, stopped <-chan error) error {
	body := []byte(`{"apiVersion":"hooks.runtime.cluster.x-k8s.io/v1alpha1","kind":"DiscoveryRequest"}`)
	deadline := time.Now().Add(60 * time.Second)
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/hooks.runtime.cluster.x-k8s.io/v1alpha1/discovery", bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
		select {
		case stopErr := <-stopped:
			return fmt.Errorf("the manager stopped before serving hooks: %w", stopErr)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the hook server did not answer discovery within 60s: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
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

// benchCluster is the Cluster the lifecycle requests are about.
func benchCluster() *clusterv1.Cluster {
	return &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: benchNamespace, Name: "bench", Annotations: map[string]string{"example.com/a": "b"}},
		Spec: clusterv1.ClusterSpec{Topology: clusterv1.Topology{
			ClassRef: clusterv1.ClusterClassRef{Name: "monolith"}, Version: "v1.35.0",
			ControlPlane: clusterv1.ControlPlaneTopology{Replicas: ptr.To[int32](3)},
		}},
	}
}

// beforeClusterCreate is the request Cluster API sends about cluster.
func beforeClusterCreate(cluster *clusterv1.Cluster) *runtimehooksv1.BeforeClusterCreateRequest {
	req := &runtimehooksv1.BeforeClusterCreateRequest{Cluster: *cluster.DeepCopy()}
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
