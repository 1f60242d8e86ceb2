package serving_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	runtimecatalog "sigs.k8s.io/cluster-api/api/runtime/catalog"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"

	"github.com/capi-monolith/capi-monolith/runtimeext/internal/handlers"
	"github.com/capi-monolith/capi-monolith/runtimeext/internal/serving"
)

// hookPaths are the paths the fuzzer picks from: every handler, discovery,
// a panicking test handler and an unknown hook.
func hookPaths() ([]string, error) {
	list, err := handlers.List(handlers.Options{})
	if err != nil {
		return nil, err
	}
	cat, err := serving.Catalog()
	if err != nil {
		return nil, err
	}
	paths := []string{"/hooks.runtime.cluster.x-k8s.io/v1alpha1/discovery", "/hooks.runtime.cluster.x-k8s.io/v1alpha1/nohook/x"}
	for _, h := range list {
		gvh, err := cat.GroupVersionHook(h.Hook)
		if err != nil {
			return nil, err
		}
		paths = append(paths, runtimecatalog.GVHToPath(gvh, h.Name))
	}
	return append(paths, "/hooks.runtime.cluster.x-k8s.io/v1alpha1/aftercontrolplaneinitialized/panics"), nil
}

// FuzzHookEntryPoints sends arbitrary bodies to every hook path: the answer
// is always a client error or a well-formed hook response, never a panic or
// a server error.
func FuzzHookEntryPoints(f *testing.F) {
	seed := func(kind string, extra string) []byte {
		return []byte(`{"apiVersion":"hooks.runtime.cluster.x-k8s.io/v1alpha1","kind":"` + kind + `"` + extra + `}`)
	}
	f.Add(uint8(0), seed("DiscoveryRequest", ""), "")
	f.Add(uint8(2), seed("BeforeClusterCreateRequest", `,"cluster":{"metadata":{"name":"c","annotations":{"runtime.capi-monolith.dev/hold":"BeforeClusterCreate"}}}`), "timeout=10s")
	f.Add(uint8(2), seed("BeforeClusterCreateRequest", `,"settings":{"retryAfterSeconds":"-1"}`), "")
	f.Add(uint8(2), seed("BeforeClusterCreateRequest", `,"cluster":{"spec":{"topology":{"classRef":{"name":"x"},"version":"v1.35.0","variables":[{"name":"monolithAddressPools","value":"nope"}]}}}`), "")
	f.Add(uint8(11), seed("GeneratePatchesRequest", `,"items":[{"uid":"1","holderReference":{"apiVersion":"v1","kind":"K","namespace":"n","name":"x","fieldPath":"spec"},"object":{"apiVersion":"infrastructure.cluster.x-k8s.io/v1alpha1","kind":"MonolithMachineTemplate","spec":{"template":{"spec":{"backend":{"docker":{}}}}}},"variables":[{"name":"monolithBackend","value":"docker"}]}]`), "")
	f.Add(uint8(12), seed("ValidateTopologyRequest", `,"items":[null,{"object":{"kind":"MonolithCluster"}}]`), "")
	f.Add(uint8(14), seed("GenerateUpgradePlanRequest", `,"fromControlPlaneKubernetesVersion":"v1.30.0","toKubernetesVersion":"v1.33.1"`), "")
	f.Add(uint8(15), seed("CanUpdateMachineRequest", `,"current":{"infrastructureMachine":{"kind":"MonolithMachine"}}`), "")
	f.Add(uint8(17), seed("UpdateMachineRequest", `,"desired":{"infrastructureMachine":"x"}`), "")
	f.Add(uint8(18), seed("AfterControlPlaneInitializedRequest", ""), "")
	f.Add(uint8(3), []byte(`{"apiVersion":`), "timeout=bogus")
	f.Add(uint8(1), []byte(`[]`), "")
	f.Add(uint8(2), seed("BeforeClusterCreateRequest", ""), "timeout=1ns")

	// One server per fuzzing process; its mux (filled in by Start) is called
	// in-process.
	r, stop, err := launch(f.TempDir(), serving.Options{MaxBodyBytes: 64 << 10})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = stop() })
	h := r.srv.WebhookMux()
	paths, err := hookPaths()
	if err != nil {
		f.Fatal(err)
	}

	f.Fuzz(func(t *testing.T, pathIdx uint8, body []byte, query string) {
		path := paths[int(pathIdx)%len(paths)]
		req := httptest.NewRequest(http.MethodPost, "https://127.0.0.1"+path, bytes.NewReader(body))
		if !strings.ContainsAny(query, "#") {
			req.URL.RawQuery = query
		}
		rec := httptest.NewRecorder()
		done := make(chan struct{})
		go func() { defer close(done); h.ServeHTTP(rec, req) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("no answer within 20s for %s", path)
		}
		switch rec.Code {
		case http.StatusBadRequest, http.StatusNotFound, http.StatusRequestEntityTooLarge,
			// A ?timeout= shorter than the handler needs.
			http.StatusGatewayTimeout:
			return
		case http.StatusOK:
		default:
			t.Fatalf("status %d for %s: %s", rec.Code, path, rec.Body.String())
		}
		var resp runtimehooksv1.CommonResponse
		if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
			t.Fatalf("200 with a body that is not a response: %v: %s", err, rec.Body.String())
		}
		if resp.Status != runtimehooksv1.ResponseStatusSuccess && resp.Status != runtimehooksv1.ResponseStatusFailure {
			t.Fatalf("200 with status %q: %s", resp.Status, rec.Body.String())
		}
	})
}
