// Package controlplane starts the dev environment's Kubernetes API: etcd and
// kube-apiserver from the binaries the project builds and caches (the
// envtest assets), or an existing cluster named by a kubeconfig.
//
// It runs the two processes itself rather than through controller-runtime's
// envtest, whose process code sets no parent-death signal: here each child
// gets one (Linux), so that whatever kills dev, kill -9 included, kills them
// too, and each runs in a process group of its own, so that stopping it
// reaches everything it started. Both listen on 127.0.0.1 only, etcd over TLS
// with client certificates only (see EtcdEndpoint).
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
	// Etcd is how to reach the etcd Start runs; zero when External.
	Etcd EtcdEndpoint

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
	l, err := newLayout(opts)
	if err != nil {
		return nil, err
	}

	cp := &ControlPlane{force: make(chan struct{})}
	defer func() {
		if retErr != nil {
			retErr = errors.Join(retErr, cp.Stop())
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()
	if err := cp.startEtcd(ctx, opts, l); err != nil {
		return nil, err
	}
	if err := cp.startAPIServer(ctx, opts, l); err != nil {
		return nil, err
	}
	return cp, nil
}

// layout is where the control plane's binaries, files and listeners are.
type layout struct {
	assets, certDir string
	out             io.Writer
	// etcdURL and peerURL are etcd's client and peer URLs (https); apiHost
	// and apiPort kube-apiserver's address.
	etcdURL, peerURL, apiHost string
	apiPort                   int
}

// newLayout finds the binaries, makes the cert folder and picks the ports.
func newLayout(opts Options) (layout, error) {
	assets, err := AssetsDirectory(opts.AssetsDir, opts.CacheDir)
	if err != nil {
		return layout{}, err
	}
	l := layout{assets: assets, out: opts.Output, certDir: filepath.Join(opts.WorkDir, "pki")}
	if l.out == nil {
		l.out = io.Discard
	}
	if err := os.MkdirAll(l.certDir, 0o700); err != nil {
		return layout{}, fmt.Errorf("failed to create the control plane's cert folder: %w", err)
	}
	if err := os.Chmod(l.certDir, 0o700); err != nil {
		return layout{}, fmt.Errorf("failed to make the control plane's cert folder private: %w", err)
	}
	free, err := ports.Free(3)
	if err != nil {
		return layout{}, err
	}
	l.etcdURL = "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(free[0]))
	l.peerURL = "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(free[1]))
	l.apiPort = free[2]
	l.apiHost = net.JoinHostPort("127.0.0.1", strconv.Itoa(l.apiPort))
	return l, nil
}

// startEtcd starts etcd, serving TLS and requiring a client certificate of
// its own CA on both listeners, and waits until it is healthy; it sets
// cp.Etcd.
func (cp *ControlPlane) startEtcd(ctx context.Context, opts Options, l layout) error {
	dataDir, fsync := filepath.Join(opts.WorkDir, "etcd"), false
	if opts.DataDir != "" {
		// Data meant to survive a restart (or a crash) needs fsync on.
		dataDir, fsync = filepath.Join(opts.DataDir, "etcd"), true
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return fmt.Errorf("failed to create etcd's data folder: %w", err)
	}
	ep, files, err := writeEtcdPKI(filepath.Join(l.certDir, "etcd"), l.etcdURL)
	if err != nil {
		return err
	}
	if cp.etcd, err = startProcess("etcd", filepath.Join(l.assets, "etcd"), []string{
		"--data-dir=" + dataDir,
		"--listen-client-urls=" + l.etcdURL,
		"--advertise-client-urls=" + l.etcdURL,
		"--cert-file=" + files.serverCert,
		"--key-file=" + files.serverKey,
		"--client-cert-auth=true",
		"--trusted-ca-file=" + ep.CAFile,
		// The peer listener too: it takes raft messages, which write.
		"--listen-peer-urls=" + l.peerURL,
		"--initial-advertise-peer-urls=" + l.peerURL,
		"--initial-cluster=default=" + l.peerURL,
		"--peer-cert-file=" + files.serverCert,
		"--peer-key-file=" + files.serverKey,
		"--peer-client-cert-auth=true",
		"--peer-trusted-ca-file=" + ep.CAFile,
		"--unsafe-no-fsync=" + strconv.FormatBool(!fsync),
	}, l.out); err != nil {
		return err
	}
	if opts.OnProcess != nil {
		opts.OnProcess("etcd", cp.etcd.pid())
	}
	tlsConfig, err := ep.TLSConfig()
	if err != nil {
		return err
	}
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsConfig}, Timeout: time.Second}
	if err := waitHealthy(ctx, cp.etcd, l.etcdURL+"/health", c); err != nil {
		return err
	}
	cp.Etcd = ep
	return nil
}

// startAPIServer starts kube-apiserver, with a CA of its own for serving
// and for clients, and waits until it serves; it sets cp.Config.
func (cp *ControlPlane) startAPIServer(ctx context.Context, opts Options, l layout) error {
	ca, adminCert, adminKey, err := writePKI(l.certDir)
	if err != nil {
		return err
	}
	certDir := l.certDir
	if cp.apiServer, err = startProcess("kube-apiserver", filepath.Join(l.assets, "kube-apiserver"), []string{
		"--etcd-servers=" + cp.Etcd.URL,
		"--etcd-cafile=" + cp.Etcd.CAFile,
		"--etcd-certfile=" + cp.Etcd.CertFile,
		"--etcd-keyfile=" + cp.Etcd.KeyFile,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(l.apiPort),
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
		"--service-account-issuer=https://" + l.apiHost + "/",
		"--service-account-key-file=" + filepath.Join(certDir, "sa.pub"),
		"--service-account-signing-key-file=" + filepath.Join(certDir, "sa.key"),
	}, l.out); err != nil {
		return err
	}
	if opts.OnProcess != nil {
		opts.OnProcess("kube-apiserver", cp.apiServer.pid())
	}
	cfg := &rest.Config{
		Host:            "https://" + l.apiHost,
		TLSClientConfig: rest.TLSClientConfig{CAData: ca, CertData: adminCert, KeyData: adminKey},
	}
	if err := waitAPIServer(ctx, cp.apiServer, cfg); err != nil {
		return err
	}
	cp.Config = cfg
	return nil
}

// writePKI makes kube-apiserver's CA, serving certificate and service
// account keys in certDir, and returns the CA and the admin's client
// certificate and key.
func writePKI(certDir string) (caPEM, adminCert, adminKey []byte, err error) {
	ca, err := newAuthority("capi-monolith-dev-kubernetes-ca")
	if err != nil {
		return nil, nil, nil, err
	}
	servingCert, servingKey, err := ca.servingCert()
	if err != nil {
		return nil, nil, nil, err
	}
	if adminCert, adminKey, err = ca.clientCert("capi-monolith-dev-admin", "system:masters"); err != nil {
		return nil, nil, nil, err
	}
	saPublic, saPrivate, err := serviceAccountKeys()
	if err != nil {
		return nil, nil, nil, err
	}
	files := map[string][]byte{
		"ca.crt": ca.pem, "apiserver.crt": servingCert, "apiserver.key": servingKey,
		"sa.pub": saPublic, "sa.key": saPrivate,
	}
	for name, data := range files {
		if err := writePrivate(filepath.Join(certDir, name), data); err != nil {
			return nil, nil, nil, err
		}
	}
	return ca.pem, adminCert, adminKey, nil
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
