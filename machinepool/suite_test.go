package machinepool_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"

	infrav1 "github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	ipamv1alpha1 "github.com/capi-monolith/capi-monolith/ipam/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/machinepool/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/test/capicore"
	"github.com/capi-monolith/capi-monolith/test/envtest"
)

var (
	env *envtest.Environment
	// core is Cluster API's own core manager (MachinePool feature gate on):
	// it makes and deletes the MachinePool Machines under test.
	core *capicore.Process
)

func TestMain(m *testing.M) {
	ctrl.SetLogger(envtest.TestLogger())
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.Exit(code)
}

func run(m *testing.M) (code int, reterr error) {
	ctx := context.Background()
	scheme, err := envtest.NewScheme()
	if err != nil {
		return 1, err
	}
	for _, add := range []func(*runtime.Scheme) error{infrav1.AddToScheme, v1alpha1.AddToScheme, ipamv1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			return 1, fmt.Errorf("failed to build the test scheme: %w", err)
		}
	}
	env, err = envtest.Start(ctx, envtest.Options{
		Scheme: scheme,
		CRDDirectoryPaths: []string{
			filepath.Join("..", "manifests", "infra", "crd"),
			filepath.Join("..", "manifests", "machinepool", "crd"),
			filepath.Join("..", "manifests", "ipam", "crd"),
		},
	})
	if err != nil {
		return 1, err
	}
	defer func() { reterr = errors.Join(reterr, env.Stop()) }()

	var output io.Writer
	if os.Getenv(envtest.LogsEnv) != "" {
		output = os.Stderr
	}
	core, err = capicore.Start(ctx, capicore.Options{Config: env.Config, Output: output})
	if err != nil {
		return 1, err
	}
	defer func() { reterr = errors.Join(reterr, core.Stop()) }()
	code = m.Run()
	// Checked after every test, so that a later test's manager recreating
	// what an earlier test removed is caught too.
	if err := dockerLeftovers(ctx); err != nil {
		return 1, err
	}
	return code, nil
}
