package reconcile_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/capi-monolith/capi-monolith/test/envtest"
)

var env *envtest.Environment

func TestMain(m *testing.M) {
	ctrl.SetLogger(envtest.TestLogger())
	var err error
	if env, err = envtest.Start(context.Background(), envtest.Options{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	os.Exit(code)
}
