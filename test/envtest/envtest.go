package envtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"
)

// apiServerStopTimeout bounds a graceful stop of kube-apiserver and etcd
// (Stop, RestartAPIServer).
const apiServerStopTimeout = 2 * time.Minute

// Options configures Start. The zero value starts an apiserver with Cluster
// API's CRDs and NewScheme's types.
type Options struct {
	// Scheme is the scheme of Environment.Client. Default: NewScheme().
	Scheme *runtime.Scheme

	// CRDDirectoryPaths are extra folders (or files) of CRDs installed beside
	// Cluster API's, e.g. manifests/<module>/crd. A missing path is an error.
	// Default: none.
	CRDDirectoryPaths []string

	// WebhookInstallOptions is handed to controller-runtime's envtest as is, for
	// suites that serve webhooks from the test process. After Start, the
	// completed options (serving port, cert folder) are in
	// Environment.WebhookInstallOptions. Default: no webhooks.
	WebhookInstallOptions crenvtest.WebhookInstallOptions

	// APIServerFlags are extra kube-apiserver flags (name without "--" to
	// value), e.g. request-timeout: a graceful stop waits up to that long
	// for open connections, so a suite restarting the apiserver
	// (RestartAPIServer) shortens it. Default: none.
	APIServerFlags map[string]string

	// AttachControlPlaneOutput copies kube-apiserver's and etcd's output to
	// os.Stdout and os.Stderr. Default: false (also turned on by
	// KUBEBUILDER_ATTACH_CONTROL_PLANE_OUTPUT=true).
	AttachControlPlaneOutput bool
}

// Environment is a running kube-apiserver and etcd with CRDs installed.
type Environment struct {
	// Config is the admin (system:masters) config of the apiserver.
	Config *rest.Config
	// Client is an uncached client: every read goes to the apiserver.
	Client client.Client
	// Scheme is the scheme of Client.
	Scheme *runtime.Scheme
	// WebhookInstallOptions are the webhook options as envtest completed them.
	WebhookInstallOptions *crenvtest.WebhookInstallOptions

	env *crenvtest.Environment
	// certDir is kube-apiserver's certificate folder, ours rather than
	// one controller-runtime makes and removes on every apiserver stop, so
	// that RestartAPIServer keeps its serving certificate and keys.
	certDir  string
	stopOnce sync.Once
	stopErr  error
}

// Start starts kube-apiserver and etcd, installs Cluster API's CRDs and the
// ones in opts.CRDDirectoryPaths, and returns once every CRD is served.
// Call Stop when done, also when a test fails.
func Start(ctx context.Context, opts Options) (*Environment, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("failed to start envtest: %w", err)
	}
	scheme := opts.Scheme
	if scheme == nil {
		var err error
		if scheme, err = NewScheme(); err != nil {
			return nil, err
		}
	}
	assets, err := BinaryAssetsDirectory()
	if err != nil {
		return nil, err
	}
	capiCRDs, err := ClusterAPICRDDirectory()
	if err != nil {
		return nil, err
	}

	env := &crenvtest.Environment{
		Scheme:                   scheme,
		CRDDirectoryPaths:        append([]string{capiCRDs}, opts.CRDDirectoryPaths...),
		ErrorIfCRDPathMissing:    true,
		WebhookInstallOptions:    opts.WebhookInstallOptions,
		AttachControlPlaneOutput: opts.AttachControlPlaneOutput,
		BinaryAssetsDirectory:    assets,
	}
	// Set the binaries explicitly so that no TEST_ASSET_* variable or
	// setup-envtest folder can swap in another version behind our back.
	env.ControlPlane.GetAPIServer().Path = filepath.Join(assets, "kube-apiserver")
	env.ControlPlane.Etcd = &crenvtest.Etcd{Path: filepath.Join(assets, "etcd")}
	certDir, err := os.MkdirTemp("", "capi-monolith-envtest-apiserver-")
	if err != nil {
		return nil, fmt.Errorf("failed to create kube-apiserver's certificate folder: %w", err)
	}
	env.ControlPlane.GetAPIServer().CertDir = certDir
	// A graceful stop of an apiserver with clients (watches of a manager
	// and of core) can take longer than controller-runtime's 20 s, after
	// which it SIGKILLs the process and returns without waiting for it to
	// exit, so that a start right after would find the port taken.
	env.ControlPlaneStopTimeout = apiServerStopTimeout
	for name, value := range opts.APIServerFlags {
		env.ControlPlane.GetAPIServer().Configure().Set(name, value)
	}

	cfg, err := env.Start()
	if err != nil {
		// Start may fail after etcd or the apiserver started: stop what runs.
		return nil, errors.Join(fmt.Errorf("failed to start envtest with binaries from %s: %w", assets, err), env.Stop(), os.RemoveAll(certDir))
	}
	e := &Environment{
		Config:                cfg,
		Scheme:                scheme,
		WebhookInstallOptions: &env.WebhookInstallOptions,
		env:                   env,
		certDir:               certDir,
	}
	if e.Client, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		return nil, errors.Join(fmt.Errorf("failed to create the envtest client: %w", err), e.Stop())
	}
	if err := ctx.Err(); err != nil {
		return nil, errors.Join(fmt.Errorf("failed to start envtest: %w", err), e.Stop())
	}
	return e, nil
}

// Stop stops kube-apiserver and etcd and removes their data. It is safe to
// call more than once; later calls return the first call's result.
func (e *Environment) Stop() error {
	e.stopOnce.Do(func() {
		if err := e.env.Stop(); err != nil {
			e.stopErr = fmt.Errorf("failed to stop envtest: %w", err)
		}
		e.stopErr = errors.Join(e.stopErr, os.RemoveAll(e.certDir))
	})
	return e.stopErr
}

// RestartAPIServer stops kube-apiserver and starts it again on the same
// etcd, address, serving certificate and client CA, so that Config (and
// every client or process made from it) works again once it is back; what
// is stored survives, watches and requests in flight are cut. It returns
// once the new process answers /healthz. etcd keeps running. Not safe to
// call concurrently with itself or Stop.
func (e *Environment) RestartAPIServer() error {
	apiServer := e.env.ControlPlane.GetAPIServer()
	if err := apiServer.Stop(); err != nil {
		return fmt.Errorf("failed to stop kube-apiserver for a restart: %w", err)
	}
	if err := apiServer.Start(); err != nil {
		return fmt.Errorf("failed to start kube-apiserver again: %w", err)
	}
	return nil
}

// CreateNamespace creates a namespace whose name starts with prefix and ends
// with a random suffix chosen by the apiserver, so that tests never collide.
// Namespace creates a namespace named after prefix for one test and
// returns its name; it fails the test when it cannot.
func (e *Environment) Namespace(t *testing.T, prefix string) string {
	t.Helper()
	ns, err := e.CreateNamespace(t.Context(), prefix)
	if err != nil {
		t.Fatalf("failed to create a namespace: %v", err)
	}
	return ns.Name
}

func (e *Environment) CreateNamespace(ctx context.Context, prefix string) (*corev1.Namespace, error) {
	if !strings.HasSuffix(prefix, "-") {
		prefix += "-"
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix}}
	if err := e.Client.Create(ctx, ns); err != nil {
		return nil, fmt.Errorf("failed to create namespace with prefix %q: %w", prefix, err)
	}
	return ns, nil
}

// Kubeconfig returns a kubeconfig with the admin's credentials, for
// subprocesses.
func (e *Environment) Kubeconfig() ([]byte, error) {
	return KubeconfigFromREST(e.Config)
}

// WriteKubeconfig writes Kubeconfig() to path (mode 0600).
func (e *Environment) WriteKubeconfig(path string) error {
	return WriteKubeconfigFromREST(e.Config, path)
}
