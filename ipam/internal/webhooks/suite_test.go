package webhooks_test

import (
	"context"
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/capi-monolith/capi-monolith/ipam/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/ipam/internal/index"
	"github.com/capi-monolith/capi-monolith/ipam/internal/webhooks"
	"github.com/capi-monolith/capi-monolith/test/envtest"
)

const (
	crdPath     = "../../../manifests/ipam/crd"
	webhookPath = "../../../manifests/ipam/webhook"
	// timeout bounds every wait on the apiserver, the cache or the webhook.
	timeout = 20 * time.Second
)

var (
	env *envtest.Environment
	mgr ctrl.Manager
	// cached is the manager's client: what the webhook reads. Tests wait on
	// it so that the webhook sees the objects they just wrote.
	cached client.Client
)

// TestMain starts the apiserver, which calls the webhook configurations of
// manifests/ipam/webhook, and a manager serving them from this process.
func TestMain(m *testing.M) {
	envtest.WebhookMain(m, &env, &mgr, func(mgr ctrl.Manager) error {
		cached = mgr.GetClient()
		if err := index.Setup(context.Background(), mgr); err != nil {
			return err
		}
		return webhooks.SetupWithManager(mgr)
	}, envtest.Options{
		CRDDirectoryPaths:     []string{crdPath},
		WebhookInstallOptions: crenvtest.WebhookInstallOptions{Paths: []string{webhookPath}},
	}, v1alpha1.AddToScheme)
}
