package runtimeext_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
	"sigs.k8s.io/cluster-api/exp/runtime/server"
	"sigs.k8s.io/cluster-api/util/test/builder"

	infrav1 "github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/ipam"
	"github.com/capi-monolith/capi-monolith/manager"
	"github.com/capi-monolith/capi-monolith/modules"
	"github.com/capi-monolith/capi-monolith/runtimeext"
	"github.com/capi-monolith/capi-monolith/runtimeext/internal/serving"
	"github.com/capi-monolith/capi-monolith/test/capicore"
	"github.com/capi-monolith/capi-monolith/test/envtest"
	"github.com/capi-monolith/capi-monolith/test/managertest"
)

var (
	env  *envtest.Environment
	core *capicore.Process
	// hooksURL is where our manager serves hooks and admission webhooks.
	hooksURL string
	// caPEM signed the serving certificate of our manager.
	caPEM []byte
)

// slowAnnotation on a Cluster makes the test-only "slow-<value>" handler of
// BeforeClusterCreate outlive its timeout.
const slowAnnotation = "runtimeext-test/slow"

func TestMain(m *testing.M) {
	ctrl.SetLogger(envtest.TestLogger())
	os.Exit(run(m))
}

func run(m *testing.M) int {
	fail := func(err error) int { fmt.Fprintln(os.Stderr, err); return 1 }
	crdDir, err := os.MkdirTemp("", "runtimeext-crds-")
	if err != nil {
		return fail(err)
	}
	defer os.RemoveAll(crdDir)
	if err := writeGenericCRDs(crdDir); err != nil {
		return fail(err)
	}
	scheme, err := envtest.NewScheme()
	if err != nil {
		return fail(err)
	}
	for _, add := range []func(*runtime.Scheme) error{infrav1.AddToScheme, runtimeext.New(runtimeext.DefaultOptions()).AddToScheme} {
		if err := add(scheme); err != nil {
			return fail(err)
		}
	}
	env, err = envtest.Start(context.Background(), envtest.Options{
		Scheme:            scheme,
		CRDDirectoryPaths: []string{"../manifests/infra/crd", "../manifests/ipam/crd", crdDir},
		// The ipam module's admission webhooks, pointed at our manager's
		// port: they prove other modules' webhooks are served by the runtime
		// extension server.
		WebhookInstallOptions: crenvtest.WebhookInstallOptions{Paths: []string{"../manifests/ipam/webhook"}},
	})
	if err != nil {
		return fail(err)
	}
	defer func() { _ = env.Stop() }()
	wio := env.WebhookInstallOptions
	hooksURL = fmt.Sprintf("https://%s:%d", wio.LocalServingHost, wio.LocalServingPort)
	caPEM = wio.LocalServingCAData

	out := os.Stdout
	if os.Getenv("CAPI_MONOLITH_TEST_LOGS") == "" {
		out = nil
	}
	coreOpts := capicore.Options{Config: env.Config}
	if out != nil {
		coreOpts.Output = out
	}
	core, err = capicore.Start(context.Background(), coreOpts)
	if err != nil {
		return fail(err)
	}
	defer func() { _ = core.Stop() }()

	stop, err := startManager(wio.LocalServingPort, wio.LocalServingCertDir)
	if err != nil {
		return fail(err)
	}
	defer stop()
	return m.Run()
}

// startManager runs the binary's manager with the ipam and runtimeext
// modules, as `capi-monolith --enable-modules=ipam,runtimeext` would, plus
// two test-only handlers that outlive their timeout on request.
func startManager(port int, certDir string) (func(), error) {
	// The test registers its own ExtensionConfig with a URL: a Service
	// name does not resolve outside a cluster.
	opts := runtimeext.DefaultOptions()
	opts.Registration.Name = ""
	return startManagerWith(port, certDir, []server.ExtensionHandler{
		slowHandler("ignore", runtimehooksv1.FailurePolicyIgnore), slowHandler("fail", runtimehooksv1.FailurePolicyFail),
	}, ipam.New(ipam.DefaultOptions()), runtimeext.New(opts))
}

// startManagerWith builds the manager of mods, adds extra handlers
// and runs it until the returned function is called.
func startManagerWith(port int, certDir string, extra []server.ExtensionHandler, mods ...modules.Module) (func(), error) {
	return startManagerWithOptions(managertest.Options(), port, certDir, extra, mods...)
}

// startManagerWithOptions is startManagerWith with the manager's options.
func startManagerWithOptions(opts manager.Options, port int, certDir string, extra []server.ExtensionHandler, mods ...modules.Module) (func(), error) {
	opts.WebhookPort = port
	opts.WebhookCertDir = certDir
	mgr, err := manager.New(context.Background(), env.Config, opts, mods...)
	if err != nil {
		return nil, err
	}
	srv, ok := serving.FromManager(mgr)
	if !ok {
		return nil, fmt.Errorf("the manager's webhook server is %T, not the runtime extension server", mgr.GetWebhookServer())
	}
	if err := serving.AddHandlers(srv, extra); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	stop := func() {
		cancel()
		if err := <-done; err != nil {
			fmt.Fprintln(os.Stderr, "manager:", err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for srv.StartedChecker()(&http.Request{}) != nil {
		if time.Now().After(deadline) {
			stop()
			return nil, fmt.Errorf("the webhook server did not start within 30s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	return stop, nil
}

func slowHandler(which string, policy runtimehooksv1.FailurePolicy) server.ExtensionHandler {
	return server.ExtensionHandler{
		Name: "slow-" + which, Hook: runtimehooksv1.BeforeClusterCreate, TimeoutSeconds: ptr.To[int32](1), FailurePolicy: ptr.To(policy),
		HandlerFunc: func(ctx context.Context, req *runtimehooksv1.BeforeClusterCreateRequest, resp *runtimehooksv1.BeforeClusterCreateResponse) {
			if req.Cluster.Annotations[slowAnnotation] == which {
				// Longer than the deadline the guard derives from ?timeout=.
				select {
				case <-ctx.Done():
				case <-time.After(5 * time.Second):
				}
				<-time.After(100 * time.Millisecond)
			}
			resp.SetStatus(runtimehooksv1.ResponseStatusSuccess)
		},
	}
}

// writeGenericCRDs writes Cluster API's generic control plane and bootstrap
// test CRDs, the ClusterClass's non-infrastructure templates.
func writeGenericCRDs(dir string) error {
	for i, crd := range []*apiextensionsv1.CustomResourceDefinition{
		builder.GenericControlPlaneCRD, builder.GenericControlPlaneTemplateCRD,
		builder.GenericBootstrapConfigCRD, builder.GenericBootstrapConfigTemplateCRD,
	} {
		crd = crd.DeepCopy()
		crd.APIVersion, crd.Kind = "apiextensions.k8s.io/v1", "CustomResourceDefinition"
		b, err := yaml.Marshal(crd)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("crd-%d.yaml", i)), b, 0o600); err != nil {
			return err
		}
	}
	return nil
}
