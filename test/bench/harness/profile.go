package harness

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"k8s.io/client-go/rest"
)

// SaveAPIServerProfile writes one of kube-apiserver's pprof profiles
// ("heap", "goroutine", "profile?seconds=30", ...) to path, read from its
// /debug/pprof endpoint with cfg's (admin) credentials; `go tool pprof path`
// reads it. envtest's apiserver being a separate process, this is how a
// benchmark tells where the apiserver's own time and memory go.
func SaveAPIServerProfile(ctx context.Context, cfg *rest.Config, profile, path string) error {
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return fmt.Errorf("failed to create an HTTP client for the apiserver: %w", err)
	}
	url := strings.TrimSuffix(cfg.Host, "/") + "/debug/pprof/" + profile
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("failed to build the profile request: %w", err)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return fmt.Errorf("failed to read the apiserver's %s profile: %w", profile, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("failed to read the apiserver's %s profile: %s", profile, resp.Status)
	}
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("failed to read the apiserver's %s profile: %w", profile, err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("failed to write the apiserver's %s profile: %w", profile, err)
	}
	return nil
}
