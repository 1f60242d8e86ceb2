package webhooks_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"testing"

	ctrl "sigs.k8s.io/controller-runtime"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/capi-monolith/capi-monolith/machinepool/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/machinepool/webhooks"
	"github.com/capi-monolith/capi-monolith/test/envtest"
)

var env *envtest.Environment

func TestMain(m *testing.M) {
	ctrl.SetLogger(envtest.TestLogger())
	// `go test -fuzz` (make fuzz) runs only a fuzz target, which calls the
	// validators directly: no apiserver, in the coordinator or in any of
	// its workers.
	flag.Parse()
	if f := flag.Lookup("test.fuzz"); f != nil && f.Value.String() != "" {
		os.Exit(m.Run())
	}
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.Exit(code)
}

// run starts the apiserver, which calls the webhook configurations of
// manifests/machinepool/webhook, and a manager serving them from this
// process.
func run(m *testing.M) (code int, reterr error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	scheme, err := envtest.NewScheme()
	if err != nil {
		return 1, err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return 1, fmt.Errorf("failed to add the machinepool types to the scheme: %w", err)
	}
	env, err = envtest.Start(ctx, envtest.Options{
		Scheme:                scheme,
		CRDDirectoryPaths:     []string{"../../manifests/machinepool/crd"},
		WebhookInstallOptions: crenvtest.WebhookInstallOptions{Paths: []string{"../../manifests/machinepool/webhook"}},
	})
	if err != nil {
		return 1, err
	}
	defer func() { reterr = errors.Join(reterr, env.Stop()) }()
	_, stop, err := env.StartWebhookManager(ctx, webhooks.SetupWithManager)
	if err != nil {
		return 1, err
	}
	defer func() { reterr = errors.Join(reterr, stop()) }()
	return m.Run(), nil
}
