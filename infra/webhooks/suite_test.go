package webhooks_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/infra/webhooks"
	"github.com/capi-monolith/capi-monolith/test/envtest"
)

const (
	crdPath     = "../../manifests/infra/crd"
	webhookPath = "../../manifests/infra/webhook"
	// timeout bounds every wait on the apiserver, the cache or the webhook.
	timeout = 20 * time.Second
)

var (
	env *envtest.Environment
	// cached is the manager's client: what the webhook reads. Tests wait on
	// it so that the webhook sees the objects they just wrote.
	cached client.Client
)

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
// manifests/infra/webhook, and a manager serving them from this process.
func run(m *testing.M) (code int, reterr error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	scheme, err := envtest.NewScheme()
	if err != nil {
		return 1, err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return 1, fmt.Errorf("failed to add the infra types to the scheme: %w", err)
	}
	env, err = envtest.Start(ctx, envtest.Options{
		Scheme:                scheme,
		CRDDirectoryPaths:     []string{crdPath},
		WebhookInstallOptions: crenvtest.WebhookInstallOptions{Paths: []string{webhookPath}},
	})
	if err != nil {
		return 1, err
	}
	defer func() { reterr = errors.Join(reterr, env.Stop()) }()

	mgr, stop, err := env.StartWebhookManager(ctx, webhooks.SetupWithManager)
	if err != nil {
		return 1, err
	}
	defer func() { reterr = errors.Join(reterr, stop()) }()
	cached = mgr.GetClient()
	return m.Run(), nil
}
