package manager

import "testing"

func TestWatchedResource(t *testing.T) {
	for path, want := range map[string]string{
		"/api/v1/secrets":                                                  "secrets",
		"/api/v1/namespaces/ns/configmaps":                                 "configmaps",
		"/apis/cluster.x-k8s.io/v1beta2/clusters":                          "clusters.cluster.x-k8s.io",
		"/apis/ipam.cluster.x-k8s.io/v1beta2/namespaces/n/ipaddressclaims": "ipaddressclaims.ipam.cluster.x-k8s.io",
		"/healthz": "unknown",
		"/apis/g":  "unknown",
	} {
		if got := watchedResource(path); got != want {
			t.Errorf("watchedResource(%q) = %q, want %q", path, got, want)
		}
	}
}
