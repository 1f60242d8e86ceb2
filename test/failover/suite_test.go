package failover

import (
	"path/filepath"
	"testing"

	"github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/test/envtest"
)

var env *envtest.Environment

func TestMain(m *testing.M) {
	envtest.Main(m, &env, envtest.Options{
		CRDDirectoryPaths: []string{filepath.Join("..", "..", "manifests", "infra", "crd")},
	}, v1alpha1.AddToScheme)
}
