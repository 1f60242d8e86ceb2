package webhooks_test

import (
	"testing"

	ctrl "sigs.k8s.io/controller-runtime"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/capi-monolith/capi-monolith/machinepool/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/machinepool/internal/webhooks"
	"github.com/capi-monolith/capi-monolith/test/envtest"
)

var (
	env *envtest.Environment
	mgr ctrl.Manager
)

// TestMain starts the apiserver, which calls the webhook configurations of
// manifests/machinepool/webhook, and a manager serving them from this
// process.
func TestMain(m *testing.M) {
	envtest.WebhookMain(m, &env, &mgr, webhooks.SetupWithManager, envtest.Options{
		CRDDirectoryPaths:     []string{"../../../manifests/machinepool/crd"},
		WebhookInstallOptions: crenvtest.WebhookInstallOptions{Paths: []string{"../../../manifests/machinepool/webhook"}},
	}, v1alpha1.AddToScheme)
}
