package webhooks_test

import (
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/infra/internal/webhooks"
	"github.com/capi-monolith/capi-monolith/test/envtest"
)

const (
	crdPath     = "../../../manifests/infra/crd"
	webhookPath = "../../../manifests/infra/webhook"
	// timeout bounds every wait on the apiserver, the cache or the webhook.
	timeout = 20 * time.Second
)

var (
	env *envtest.Environment
	// mgr serves the webhooks; its cached client is what they read, and
	// tests wait on it so that the webhook sees the objects they just wrote.
	mgr ctrl.Manager
)

// TestMain starts the apiserver, which calls the webhook configurations of
// manifests/infra/webhook, and a manager serving them from this process.
func TestMain(m *testing.M) {
	envtest.WebhookMain(m, &env, &mgr, webhooks.SetupWithManager, envtest.Options{
		CRDDirectoryPaths:     []string{crdPath},
		WebhookInstallOptions: crenvtest.WebhookInstallOptions{Paths: []string{webhookPath}},
	}, v1alpha1.AddToScheme)
}
