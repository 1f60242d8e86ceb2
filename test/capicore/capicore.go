package capicore

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capi-monolith/capi-monolith/test/envtest"
)

const (
	// DefaultFeatureGates turns on what later suites need from core.
	DefaultFeatureGates = "ClusterTopology=true,MachinePool=true,RuntimeSDK=true"
	// DefaultStartTimeout bounds Start's wait for the process to be ready.
	DefaultStartTimeout = 60 * time.Second

	// stopGracePeriod is how long Stop waits after SIGTERM before SIGKILL;
	// core's manager shuts its controllers down well within it.
	stopGracePeriod = 10 * time.Second
	// cleanupTimeout bounds the API calls of Stop and of a failed Start.
	cleanupTimeout = 30 * time.Second
	pollInterval   = 100 * time.Millisecond
)

// Options configures Start.
type Options struct {
	// Config is the admin config of the apiserver (envtest.Environment.Config).
	// Required.
	Config *rest.Config

	// BinaryPath is Cluster API's core manager. Default: $CAPI_CORE_MANAGER,
	// else <envtest.CacheDir>/capi-core/<cluster-api version>/manager, the
	// file `make capi-core` builds.
	BinaryPath string

	// FeatureGates is the value of --feature-gates. Default: DefaultFeatureGates.
	FeatureGates string

	// ExtraArgs are appended to the command line; a flag given here wins over
	// the one Start sets, since the last value of a flag counts.
	ExtraArgs []string

	// Output receives the process's stdout and stderr. Default: discarded.
	// Either way the last 200 lines are kept for errors and Process.Output.
	Output io.Writer

	// WorkDir holds the kubeconfig and the serving certificates. Default: a new
	// temporary folder, removed by Stop. A given folder is left in place.
	WorkDir string

	// StartTimeout bounds the wait for the process to be ready.
	// Default: DefaultStartTimeout.
	StartTimeout time.Duration
}

// Process is a running Cluster API core manager.
type Process struct {
	cmd         *exec.Cmd
	output      *tailWriter
	client      client.Client
	webhooks    *webhookConfigurations
	conversions []conversionPatch
	convertURL  string

	webhookAddr     string
	healthAddr      string
	diagnosticsAddr string
	workDir         string
	removeWorkDir   bool

	exited chan struct{}
	// err is written once before exited is closed.
	err error

	stopOnce sync.Once
	stopErr  error
}

// Start installs Cluster API core's webhook configurations and conversion
// webhooks pointing at a new process, runs the process and waits until it is
// ready: /readyz answers 200 and the webhook port serves the certificate Start
// made. ctx bounds Start only; the process runs until Stop.
func Start(ctx context.Context, opts Options) (_ *Process, retErr error) {
	if opts.Config == nil {
		return nil, fmt.Errorf("failed to start Cluster API core: Options.Config is required")
	}
	if opts.FeatureGates == "" {
		opts.FeatureGates = DefaultFeatureGates
	}
	if opts.Output == nil {
		opts.Output = io.Discard
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = DefaultStartTimeout
	}
	capi, err := envtest.ClusterAPIModule()
	if err != nil {
		return nil, err
	}
	binary, err := binaryPath(opts.BinaryPath, capi.Version)
	if err != nil {
		return nil, err
	}

	p := &Process{
		output: newTailWriter(opts.Output),
		exited: make(chan struct{}),
	}
	// On failure, undo whatever was done so far, the process included.
	defer func() {
		if retErr != nil {
			retErr = errors.Join(retErr, p.Stop())
		}
	}()

	p.workDir = opts.WorkDir
	if p.workDir == "" {
		if p.workDir, err = os.MkdirTemp("", "capicore-"); err != nil {
			return nil, fmt.Errorf("failed to create the work folder: %w", err)
		}
		p.removeWorkDir = true
	} else if err := os.MkdirAll(p.workDir, 0o700); err != nil {
		return nil, fmt.Errorf("failed to create the work folder: %w", err)
	}
	kubeconfig := filepath.Join(p.workDir, "kubeconfig")
	if err := envtest.WriteKubeconfigFromREST(opts.Config, kubeconfig); err != nil {
		return nil, err
	}
	certs, err := newServingCerts()
	if err != nil {
		return nil, err
	}
	certDir := filepath.Join(p.workDir, "certs")
	if err := certs.write(certDir); err != nil {
		return nil, err
	}
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	webhookPort := ports[0]
	p.webhookAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(webhookPort))
	p.healthAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1]))
	p.diagnosticsAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[2]))

	if p.client, err = newClient(opts.Config); err != nil {
		return nil, err
	}
	id, err := randomID()
	if err != nil {
		return nil, err
	}
	baseURL := "https://" + p.webhookAddr
	webhooks, err := readWebhookConfigurations(
		filepath.Join(capi.Dir, "core", "config", "webhook", "manifests.yaml"),
		"capicore-"+id, baseURL, certs.caPEM)
	if err != nil {
		return nil, err
	}
	crds, err := envtest.ClusterAPICRDDirectory()
	if err != nil {
		return nil, err
	}
	names, err := crdNames(crds)
	if err != nil {
		return nil, err
	}

	// Webhooks and conversion are in place before the process starts: the
	// apiserver has seen them by the time the process is ready, so the first
	// object a test creates is already defaulted and validated by core.
	if err := webhooks.install(ctx, p.client); err != nil {
		return nil, err
	}
	p.webhooks = webhooks
	p.convertURL = baseURL + "/convert"
	p.conversions, err = useConversionWebhook(ctx, p.client, names, p.convertURL, certs.caPEM)
	if err != nil {
		return nil, err
	}

	args := []string{
		"--kubeconfig=" + kubeconfig,
		"--leader-elect=false",
		"--webhook-port=" + strconv.Itoa(webhookPort),
		"--webhook-cert-dir=" + certDir,
		"--health-addr=" + p.healthAddr,
		"--diagnostics-address=" + p.diagnosticsAddr,
		"--insecure-diagnostics",
		"--feature-gates=" + opts.FeatureGates,
	}
	p.cmd = exec.Command(binary, append(args, opts.ExtraArgs...)...)
	p.cmd.Dir = p.workDir
	p.cmd.Stdout = p.output
	p.cmd.Stderr = p.output
	p.cmd.SysProcAttr = procAttr()
	// Should the manager leave a child holding its output, Wait still returns.
	p.cmd.WaitDelay = time.Second
	if err := p.run(); err != nil {
		return nil, err
	}

	if err := p.waitReady(ctx, opts.StartTimeout, certs.caPEM); err != nil {
		return nil, err
	}
	return p, nil
}

// run starts the process and the goroutine that waits on it.
func (p *Process) run() error {
	started := make(chan error, 1)
	go func() {
		defer close(p.exited)
		// Pdeathsig fires when the thread that started the child exits, not
		// the process: keep this goroutine on its thread while the child runs.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := p.cmd.Start(); err != nil {
			p.err = fmt.Errorf("failed to start Cluster API core manager %s: %w", p.cmd.Path, err)
			started <- p.err
			return
		}
		started <- nil
		p.err = p.cmd.Wait()
	}()
	return <-started
}

func (p *Process) waitReady(ctx context.Context, timeout time.Duration, caPEM []byte) error {
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	httpClient := &http.Client{Timeout: time.Second}
	readyz := "http://" + p.healthAddr + "/readyz"

	var lastErr error
	err := wait.PollUntilContextTimeout(ctx, pollInterval, timeout, true, func(ctx context.Context) (bool, error) {
		select {
		case <-p.exited:
			// The last check failed because the process was going away.
			lastErr = nil
			return false, fmt.Errorf("failed to start: the process exited before it was ready: %w", p.err)
		default:
		}
		if lastErr = checkReadyz(ctx, httpClient, readyz); lastErr != nil {
			return false, nil
		}
		if lastErr = checkTLS(ctx, p.webhookAddr, roots); lastErr != nil {
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		if lastErr != nil {
			err = fmt.Errorf("%w (last check: %w)", err, lastErr)
		}
		return fmt.Errorf("failed to wait for Cluster API core manager to be ready: %w\nlast output:\n%s", err, p.output.String())
	}
	return nil
}

func checkReadyz(ctx context.Context, c *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("failed to build the readyz request: %w", err)
	}
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("failed to get readyz: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("failed readyz: status %s", resp.Status)
	}
	return nil
}

// checkTLS proves that the webhook port serves a certificate Start's CA signed
// for 127.0.0.1, the address the apiserver calls.
func checkTLS(ctx context.Context, addr string, roots *x509.CertPool) error {
	dialer := &tls.Dialer{
		NetDialer: &net.Dialer{Timeout: time.Second},
		Config:    &tls.Config{RootCAs: roots, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12},
	}
	conn, err := dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("failed to reach the webhook server over TLS: %w", err)
	}
	return conn.Close()
}

// Stop ends the process (SIGTERM to its process group, SIGKILL after 10s),
// deletes its webhook configurations, gives Cluster API's CRDs back the
// conversion they had before Start (unless something else changed it since)
// and removes the default work folder. It is safe to call more than once;
// later calls return the first call's result.
func (p *Process) Stop() error {
	p.stopOnce.Do(func() {
		var errs []error
		if err := p.terminate(); err != nil {
			errs = append(errs, err)
		}
		if p.client != nil {
			ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
			defer cancel()
			if p.webhooks != nil {
				if err := p.webhooks.delete(ctx, p.client); err != nil {
					errs = append(errs, err)
				}
			}
			if err := restoreConversion(ctx, p.client, p.conversions, p.convertURL); err != nil {
				errs = append(errs, err)
			}
		}
		if p.removeWorkDir {
			if err := os.RemoveAll(p.workDir); err != nil {
				errs = append(errs, fmt.Errorf("failed to remove the work folder: %w", err))
			}
		}
		p.stopErr = errors.Join(errs...)
	})
	return p.stopErr
}

func (p *Process) terminate() error {
	if p.cmd == nil || p.cmd.Process == nil {
		return nil
	}
	select {
	case <-p.exited:
		return nil
	default:
	}
	// Setpgid made the process a group leader: signal the group so that
	// nothing it started outlives it.
	pgid := p.cmd.Process.Pid
	if err := syscall.Kill(-pgid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("failed to send SIGTERM to Cluster API core manager: %w", err)
	}
	timer := time.NewTimer(stopGracePeriod)
	defer timer.Stop()
	select {
	case <-p.exited:
		return nil
	case <-timer.C:
	}
	if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("failed to send SIGKILL to Cluster API core manager: %w", err)
	}
	<-p.exited
	return nil
}

// Exited is closed when the process has exited, for whatever reason.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Err is the process's exit error (nil for a clean exit) once Exited is
// closed, and nil before.
func (p *Process) Err() error {
	select {
	case <-p.exited:
		return p.err
	default:
		return nil
	}
}

// PID is the process id, which is also its process group id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Output returns the process's last 200 lines of output.
func (p *Process) Output() string { return p.output.String() }

// WebhookAddress is host:port of core's webhook server (HTTPS).
func (p *Process) WebhookAddress() string { return p.webhookAddr }

// HealthAddress is host:port of core's /healthz and /readyz (HTTP).
func (p *Process) HealthAddress() string { return p.healthAddr }

// DiagnosticsAddress is host:port of core's /metrics (HTTP, no auth).
func (p *Process) DiagnosticsAddress() string { return p.diagnosticsAddr }

// WebhookConfigurationName is the name of both the Mutating- and the
// ValidatingWebhookConfiguration Start installed; unique per process.
func (p *Process) WebhookConfigurationName() string { return p.webhooks.mutating.Name }

func binaryPath(given, capiVersion string) (string, error) {
	path, source := given, "Options.BinaryPath"
	if path == "" {
		path, source = os.Getenv("CAPI_CORE_MANAGER"), "CAPI_CORE_MANAGER"
	}
	if path == "" {
		cache, err := envtest.CacheDir()
		if err != nil {
			return "", err
		}
		path, source = filepath.Join(cache, "capi-core", capiVersion, "manager"), "the default cache path"
	}
	info, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("failed to find Cluster API core manager at %s (%s): run `make capi-core` or set CAPI_CORE_MANAGER: %w", path, source, err)
	}
	if info.IsDir() || info.Mode()&0o111 == 0 {
		return "", fmt.Errorf("failed to use Cluster API core manager at %s (%s): not an executable file; run `make capi-core`", path, source)
	}
	return path, nil
}

func newClient(cfg *rest.Config) (client.Client, error) {
	scheme := k8sruntime.NewScheme()
	if err := admissionregistrationv1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("failed to build the scheme: %w", err)
	}
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("failed to build the scheme: %w", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("failed to create a client for the apiserver: %w", err)
	}
	return c, nil
}

// freePorts returns n distinct free loopback ports. The listeners stay open
// until all are chosen so that the kernel never hands out one twice; the
// small window before the process binds them is accepted.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("failed to find a free port: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func randomID() (string, error) {
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("failed to generate a name: %w", err)
	}
	return hex.EncodeToString(b), nil
}
