package infra_test

import (
	"path/filepath"
	"testing"

	infrav1 "github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	ipamv1alpha1 "github.com/capi-monolith/capi-monolith/ipam/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/test/envtest"
)

var env *envtest.Environment

func TestMain(m *testing.M) {
	envtest.Main(m, &env, envtest.Options{
		CRDDirectoryPaths: []string{
			filepath.Join("..", "manifests", "infra", "crd"),
			filepath.Join("..", "manifests", "ipam", "crd"),
		},
	}, infrav1.AddToScheme, ipamv1alpha1.AddToScheme)
}
