// Package controlplane starts the dev environment's Kubernetes API: etcd and
// kube-apiserver from the binaries the project builds and caches (the
// envtest assets), or an existing cluster named by a kubeconfig.
//
// It runs the two processes itself rather than through controller-runtime's
// envtest, whose process code sets no parent-death signal: here each child
// gets one (Linux), so that whatever kills dev, kill -9 included, kills them
// too, and each runs in a process group of its own, so that stopping it
// reaches everything it started. Both listen on 127.0.0.1 only.
package controlplane

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/capi-monolith/capi-monolith/dev/ports"
)

// KubernetesVersion is the version of kube-apiserver and etcd that
// `make envtest-assets` builds; it must match KUBE_VERSION in the Makefile.
const KubernetesVersion = "v1.36.3"

const (
	// DefaultStartTimeout bounds Start's wait for etcd and kube-apiserver.
	DefaultStartTimeout = 2 * time.Minute
	pollInterval        = 100 * time.Millisecond
)

// Options configures Start.
type Options struct {
	// Kubeconfig, when set, names an existing cluster to use instead of
	// starting etcd and kube-apiserver. Its current context is used.
	Kubeconfig string

	// AssetsDir holds kube-apiserver and etcd. Default: $KUBEBUILDER_ASSETS,
	// else <cache>/envtest/<KubernetesVersion> (see AssetsDirectory).
	AssetsDir string

	// CacheDir is the project's tool cache. Required when AssetsDir and
	// $KUBEBUILDER_ASSETS are empty.
	CacheDir string

	// WorkDir holds the certificates and, unless DataDir is set, etcd's
	// data. Required when starting processes; Start does not remove it.
	WorkDir string

	// DataDir keeps etcd's data (in <DataDir>/etcd, synced to disk), so that
	// the next Start on the same folder resumes where this one stopped.
	// Default: <WorkDir>/etcd without fsync, for a throwaway environment.
	DataDir string

	// Output receives etcd's and kube-apiserver's output. Default: discarded.
	Output io.Writer

	// OnProcess, when set, is called with the name and id of each process
	// once it is started, e.g. to record it for a later start to find should
	// this one be killed.
	OnProcess func(name string, pid int)

	// StartTimeout bounds the wait for both processes. Default:
	// DefaultStartTimeout.
	StartTimeout time.Duration
}

// ControlPlane is a running Kubernetes API.
type ControlPlane struct {
	// Config is the admin (system:masters) config of the apiserver.
	Config *rest.Config
	// External is true when the API is an existing cluster Start only
	// connected to.
	External bool

	etcd      *process
	apiServer *process
	force     chan struct{}
}

// Start starts etcd and kube-apiserver (or connects to opts.Kubeconfig) and
// returns once the apiserver is ready. On failure it stops what it started.
func Start(ctx context.Context, opts Options) (_ *ControlPlane, retErr error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("failed to start the control plane: %w", err)
	}
	if opts.Kubeconfig != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", opts.Kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("failed to load the kubeconfig %s: %w", opts.Kubeconfig, err)
		}
		return &ControlPlane{Config: cfg, External: true}, nil
	}
	if opts.WorkDir == "" {
		return nil, errors.New("failed to start the control plane: Options.WorkDir is required")
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = DefaultStartTimeout
	}
	assets, err := AssetsDirectory(opts.AssetsDir, opts.CacheDir)
	if err != nil {
		return nil, err
	}
	out := opts.Output
	if out == nil {
		out = io.Discard
	}
	certDir := filepath.Join(opts.WorkDir, "pki")
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		return nil, fmt.Errorf("failed to create the control plane's cert folder: %w", err)
	}
	free, err := ports.Free(3)
	if err != nil {
		return nil, err
	}
	etcdURL := "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(free[0]))
	peerURL := "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(free[1]))
	apiHost := net.JoinHostPort("127.0.0.1", strconv.Itoa(free[2]))

	cp := &ControlPlane{force: make(chan struct{})}
	defer func() {
		if retErr != nil {
			retErr = errors.Join(retErr, cp.Stop())
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()

	// etcd.
	dataDir, fsync := filepath.Join(opts.WorkDir, "etcd"), false
	if opts.DataDir != "" {
		// Data meant to survive a restart (or a crash) needs fsync on.
		dataDir, fsync = filepath.Join(opts.DataDir, "etcd"), true
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("failed to create etcd's data folder: %w", err)
	}
	if cp.etcd, err = startProcess("etcd", filepath.Join(assets, "etcd"), []string{
		"--data-dir=" + dataDir,
		"--listen-client-urls=" + etcdURL,
		"--advertise-client-urls=" + etcdURL,
		"--listen-peer-urls=" + peerURL,
		"--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=default=" + peerURL,
		"--unsafe-no-fsync=" + strconv.FormatBool(!fsync),
	}, out); err != nil {
		return nil, err
	}
	if opts.OnProcess != nil {
		opts.OnProcess("etcd", cp.etcd.pid())
	}
	if err := waitHealthy(ctx, cp.etcd, etcdURL+"/health", nil); err != nil {
		return nil, err
	}

	// kube-apiserver, with a CA of its own for serving and for clients.
	ca, err := newAuthority("capi-monolith-dev-kubernetes-ca")
	if err != nil {
		return nil, err
	}
	servingCert, servingKey, err := ca.servingCert()
	if err != nil {
		return nil, err
	}
	adminCert, adminKey, err := ca.clientCert("capi-monolith-dev-admin", "system:masters")
	if err != nil {
		return nil, err
	}
	saPublic, saPrivate, err := serviceAccountKeys()
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{
		"ca.crt": ca.pem, "apiserver.crt": servingCert, "apiserver.key": servingKey,
		"sa.pub": saPublic, "sa.key": saPrivate,
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(certDir, name), data, 0o600); err != nil {
			return nil, fmt.Errorf("failed to write %s: %w", name, err)
		}
	}
	if cp.apiServer, err = startProcess("kube-apiserver", filepath.Join(assets, "kube-apiserver"), []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(free[2]),
		"--cert-dir=" + certDir,
		"--tls-cert-file=" + filepath.Join(certDir, "apiserver.crt"),
		"--tls-private-key-file=" + filepath.Join(certDir, "apiserver.key"),
		"--client-ca-file=" + filepath.Join(certDir, "ca.crt"),
		"--authorization-mode=RBAC",
		"--service-cluster-ip-range=10.0.0.0/24",
		"--allow-privileged=true",
		// No service account controller creates the default service
		// accounts: dev's kube-controller-manager runs only the garbage
		// collector and the namespace controller.
		"--disable-admission-plugins=ServiceAccount",
		"--service-account-issuer=https://" + apiHost + "/",
		"--service-account-key-file=" + filepath.Join(certDir, "sa.pub"),
		"--service-account-signing-key-file=" + filepath.Join(certDir, "sa.key"),
	}, out); err != nil {
		return nil, err
	}
	if opts.OnProcess != nil {
		opts.OnProcess("kube-apiserver", cp.apiServer.pid())
	}
	cfg := &rest.Config{
		Host:            "https://" + apiHost,
		TLSClientConfig: rest.TLSClientConfig{CAData: ca.pem, CertData: adminCert, KeyData: adminKey},
	}
	if err := waitAPIServer(ctx, cp.apiServer, cfg); err != nil {
		return nil, err
	}
	cp.Config = cfg
	return cp, nil
}

// waitHealthy polls url until it answers 200, failing early when p exits.
func waitHealthy(ctx context.Context, p *process, url string, c *http.Client) error {
	if c == nil {
		c = &http.Client{Timeout: time.Second}
	}
	var lastErr error
	err := wait.PollUntilContextCancel(ctx, pollInterval, true, func(ctx context.Context) (bool, error) {
		select {
		case <-p.exited:
			return false, fmt.Errorf("%s exited before it was ready: %w", p.name, p.err)
		default:
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		resp, err := c.Do(req)
		if err != nil {
			lastErr = err
			return false, nil
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			lastErr = fmt.Errorf("status %s", resp.Status)
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		if lastErr != nil {
			err = fmt.Errorf("%w (last check: %w)", err, lastErr)
		}
		return fmt.Errorf("failed to wait for %s: %w", p.name, err)
	}
	return nil
}

// waitAPIServer polls /readyz with the admin's credentials.
func waitAPIServer(ctx context.Context, p *process, cfg *rest.Config) error {
	transport, err := rest.TransportFor(cfg)
	if err != nil {
		return fmt.Errorf("failed to build the apiserver's transport: %w", err)
	}
	u, err := url.JoinPath(cfg.Host, "readyz")
	if err != nil {
		return fmt.Errorf("failed to build the readyz URL: %w", err)
	}
	if err := waitHealthy(ctx, p, u, &http.Client{Transport: transport, Timeout: 5 * time.Second}); err != nil {
		return err
	}
	// Ready also means the bootstrap RBAC is in place: the admin can list.
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("failed to build a clientset: %w", err)
	}
	if _, err := cs.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
		return fmt.Errorf("failed to reach the apiserver as admin: %w", err)
	}
	return nil
}

// Kill sends SIGKILL to etcd and kube-apiserver at once; a Stop running or
// to come then stops waiting for a graceful exit. For a second Ctrl-C.
func (c *ControlPlane) Kill() {
	if c == nil || c.force == nil {
		return
	}
	select {
	case <-c.force:
	default:
		close(c.force)
	}
	c.apiServer.kill()
	c.etcd.kill()
}

// Stop stops kube-apiserver, then etcd. An existing cluster is left alone;
// the caller removes the work folder.
func (c *ControlPlane) Stop() error {
	if c == nil || c.External {
		return nil
	}
	var errs []error
	if err := c.apiServer.stop(c.force); err != nil {
		errs = append(errs, err)
	}
	if err := c.etcd.stop(c.force); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("failed to stop etcd and kube-apiserver: %w", err)
	}
	return nil
}

// AssetsDirectory returns the folder holding kube-apiserver and etcd: given,
// else $KUBEBUILDER_ASSETS, else <cacheDir>/envtest/<KubernetesVersion>. It
// fails, naming `make envtest-assets`, when the binaries are not there.
func AssetsDirectory(given, cacheDir string) (string, error) {
	dir, source := given, "Options.AssetsDir"
	if dir == "" {
		dir, source = os.Getenv("KUBEBUILDER_ASSETS"), "KUBEBUILDER_ASSETS"
	}
	if dir == "" {
		if cacheDir == "" {
			return "", fmt.Errorf("failed to find kube-apiserver and etcd: set KUBEBUILDER_ASSETS or the cache folder")
		}
		dir, source = filepath.Join(cacheDir, "envtest", KubernetesVersion), "the default cache folder"
	}
	for _, name := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			return "", fmt.Errorf("failed to find %s in %s (%s): run `make envtest-assets` or set KUBEBUILDER_ASSETS: %w", name, dir, source, err)
		}
	}
	return dir, nil
}
