package envtest

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/capi-monolith/capi-monolith/dev/capicore"
	"github.com/capi-monolith/capi-monolith/dev/capimodule"
)

const (
	// KubernetesVersion is the version of kube-apiserver and etcd that
	// `make envtest-assets` builds; it must match KUBE_VERSION in the Makefile.
	KubernetesVersion = "v1.36.3"

	// ClusterAPIModulePath is the module whose CRDs and manifests are installed.
	ClusterAPIModulePath = capimodule.Path
)

// BinaryAssetsDirectory returns the folder holding kube-apiserver and etcd:
// $KUBEBUILDER_ASSETS when it is set, else <capicore.CacheDir>/envtest/<KubernetesVersion>.
// It fails, naming `make envtest-assets`, when the binaries are not there.
func BinaryAssetsDirectory() (string, error) {
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	source := "KUBEBUILDER_ASSETS"
	if dir == "" {
		cache, err := capicore.CacheDir()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(cache, "envtest", KubernetesVersion)
		source = "the default cache folder"
	}
	for _, name := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			return "", fmt.Errorf("failed to find %s in %s (%s): run `make envtest-assets` or set KUBEBUILDER_ASSETS: %w", name, dir, source, err)
		}
	}
	return dir, nil
}

// Module is a Go module and where its files are.
type Module = capimodule.Module

// ClusterAPIModule returns the sigs.k8s.io/cluster-api module that go.mod pins,
// found in the module cache (no network: the module is in the cache whenever
// the project builds).
func ClusterAPIModule() (Module, error) {
	return capimodule.Locate()
}

// ClusterAPICRDDirectory returns the folder of Cluster API core's CRDs
// (core/config/crd/bases of the pinned module).
func ClusterAPICRDDirectory() (string, error) {
	m, err := ClusterAPIModule()
	if err != nil {
		return "", err
	}
	return m.CRDDirectory(), nil
}
