package infra_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	ctrl "sigs.k8s.io/controller-runtime"

	infrav1 "github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	ipamv1alpha1 "github.com/capi-monolith/capi-monolith/ipam/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/test/envtest"
)

var env *envtest.Environment

func TestMain(m *testing.M) {
	ctrl.SetLogger(envtest.TestLogger())
	scheme, err := envtest.NewScheme()
	if err == nil {
		err = infrav1.AddToScheme(scheme)
	}
	if err == nil {
		err = ipamv1alpha1.AddToScheme(scheme)
	}
	if err == nil {
		env, err = envtest.Start(context.Background(), envtest.Options{
			Scheme: scheme,
			CRDDirectoryPaths: []string{
				filepath.Join("..", "manifests", "infra", "crd"),
				filepath.Join("..", "manifests", "ipam", "crd"),
			},
		})
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	os.Exit(code)
}
