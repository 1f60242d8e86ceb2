package manager_test

import (
	"path/filepath"
	"testing"

	"github.com/capi-monolith/capi-monolith/test/envtest"
)

var env *envtest.Environment

func TestMain(m *testing.M) {
	// The built-in modules need their CRDs, as in a real management cluster.
	crds, _ := filepath.Glob(filepath.Join("..", "manifests", "*", "crd"))
	envtest.Main(m, &env, envtest.Options{CRDDirectoryPaths: crds})
}
