package webhooks_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

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

	wio := env.WebhookInstallOptions
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		WebhookServer: webhook.NewServer(webhook.Options{
			Host:    wio.LocalServingHost,
			Port:    wio.LocalServingPort,
			CertDir: wio.LocalServingCertDir,
		}),
	})
	if err != nil {
		return 1, fmt.Errorf("failed to create the manager: %w", err)
	}
	if err := webhooks.SetupWithManager(mgr); err != nil {
		return 1, err
	}
	cached = mgr.GetClient()

	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			reterr = errors.Join(reterr, fmt.Errorf("manager failed: %w", err))
		}
	}()
	if err := waitForWebhookServer(ctx, mgr); err != nil {
		return 1, err
	}
	return m.Run(), nil
}

// waitForWebhookServer returns once the webhook port answers TLS.
func waitForWebhookServer(ctx context.Context, mgr ctrl.Manager) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	check := mgr.GetWebhookServer().StartedChecker()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		err := check(nil)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("webhook server did not answer TLS within %s: %w", timeout, err)
		case <-tick.C:
		}
	}
}
