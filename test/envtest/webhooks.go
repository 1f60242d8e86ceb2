package envtest

import (
	"context"
	"errors"
	"fmt"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// webhookServerTimeout bounds the wait for the test webhook server.
const webhookServerTimeout = 20 * time.Second

// StartWebhookManager runs a manager serving webhooks where the apiserver
// calls them (the Environment must have been started with
// Options.WebhookInstallOptions), after setup registered them on it. It
// returns once the webhook port answers TLS; stop stops the manager.
func (e *Environment) StartWebhookManager(ctx context.Context, setup func(ctrl.Manager) error) (mgr ctrl.Manager, stop func() error, err error) {
	wio := e.WebhookInstallOptions
	if wio == nil || wio.LocalServingPort == 0 {
		return nil, nil, errors.New("the environment serves no webhooks: start it with WebhookInstallOptions")
	}
	mgr, err = ctrl.NewManager(e.Config, ctrl.Options{
		Scheme:                 e.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		WebhookServer: webhook.NewServer(webhook.Options{
			Host: wio.LocalServingHost, Port: wio.LocalServingPort, CertDir: wio.LocalServingCertDir,
		}),
	})
	if err != nil {
		return nil, nil, fmt.Errorf("failed to create the webhook manager: %w", err)
	}
	if err := setup(mgr); err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	stop = func() error {
		cancel()
		if err := <-done; err != nil {
			return fmt.Errorf("webhook manager failed: %w", err)
		}
		return nil
	}
	if err := waitForTLS(ctx, mgr); err != nil {
		return nil, nil, errors.Join(err, stop())
	}
	return mgr, stop, nil
}

func waitForTLS(ctx context.Context, mgr ctrl.Manager) error {
	ctx, cancel := context.WithTimeout(ctx, webhookServerTimeout)
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
			return fmt.Errorf("webhook server did not answer TLS within %s: %w", webhookServerTimeout, err)
		case <-tick.C:
		}
	}
}
