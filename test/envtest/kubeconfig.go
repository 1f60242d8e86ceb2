package envtest

import (
	"k8s.io/client-go/rest"

	"github.com/capi-monolith/capi-monolith/dev/kubeconfig"
)

// KubeconfigFromREST serialises cfg as a kubeconfig with one context, for
// subprocesses (Cluster API's core manager, the monolith binary, kubectl).
func KubeconfigFromREST(cfg *rest.Config) ([]byte, error) {
	return kubeconfig.FromREST(cfg, "envtest")
}

// WriteKubeconfigFromREST writes KubeconfigFromREST(cfg) to path, readable by
// the owner only because it holds the admin's credentials.
func WriteKubeconfigFromREST(cfg *rest.Config, path string) error {
	return kubeconfig.WriteFromREST(cfg, path)
}
