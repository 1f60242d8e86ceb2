package controllermanager

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	"github.com/capi-monolith/capi-monolith/dev/certs"
	"github.com/capi-monolith/capi-monolith/dev/kubeconfig"
	"github.com/capi-monolith/capi-monolith/dev/ports"
	"github.com/capi-monolith/capi-monolith/dev/procgroup"
)

// BinaryName is kube-controller-manager's file in the envtest assets folder.
const BinaryName = "kube-controller-manager"

// Controllers are the controllers the process runs (--controllers). The
// others are left out on purpose: a dev management cluster has no nodes,
// Pods or workloads of its own, and the service account controllers would
// need the apiserver's signing key.
var Controllers = []string{"garbage-collector-controller", "namespace-controller"}

const (
	// DefaultStartTimeout bounds Start's wait for /healthz.
	DefaultStartTimeout = 60 * time.Second

	// stopGracePeriod is how long Stop waits after SIGTERM before SIGKILL.
	stopGracePeriod = 10 * time.Second
	pollInterval    = 100 * time.Millisecond
)

// Options configures Start.
type Options struct {
	// BinaryPath is kube-controller-manager. Required (see Find).
	BinaryPath string

	// Config is the admin config of the apiserver. Required.
	Config *rest.Config

	// WorkDir holds the process's kubeconfig and serving certificate.
	// Required; Start creates it if needed and never removes it.
	WorkDir string

	// Certs is the serving certificate of /healthz, for 127.0.0.1.
	// Default: a new bundle.
	Certs *certs.Bundle

	// Controllers are the controllers to run (--controllers). Default:
	// Controllers.
	Controllers []string

	// Output receives the process's stdout and stderr. Default: discarded.
	// Either way the last 200 lines are kept for errors and Process.Output.
	Output io.Writer

	// StartTimeout bounds the wait for /healthz. Default: DefaultStartTimeout.
	StartTimeout time.Duration

	// Restarts is how many times a process that exits after it was ready is
	// started again before it is left dead (and Exited closes). Default: 0.
	Restarts int

	// OnStart, when set, is called with the process id each time the
	// process is started (restarts included).
	OnStart func(pid int)

	// OnExit, when set, is called each time the process exits unexpectedly
	// after it was ready, with the exit error and whether it is restarted.
	OnExit func(err error, restarting bool)
}

// Process is a running kube-controller-manager.
type Process struct {
	opts       Options
	args       []string
	output     *procgroup.Tail
	healthAddr string

	// sup runs the process; nil until it started.
	sup *procgroup.Supervisor

	stopOnce sync.Once
	stopErr  error
}

// Find returns kube-controller-manager in the envtest assets folder dir. The
// error wraps fs.ErrNotExist when it is not there: assets from before it
// was built, or from setup-envtest, which has none.
func Find(dir string) (string, error) {
	path := filepath.Join(dir, BinaryName)
	info, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("failed to find %s in %s: %w", BinaryName, dir, err)
	}
	if info.IsDir() || info.Mode()&0o111 == 0 {
		return "", fmt.Errorf("failed to use %s: not an executable file", path)
	}
	return path, nil
}

// Start runs kube-controller-manager against opts.Config and waits until its
// /healthz answers ok. ctx bounds Start only; the process runs until Stop.
func Start(ctx context.Context, opts Options) (_ *Process, retErr error) {
	opts, err := withDefaults(opts)
	if err != nil {
		return nil, err
	}
	p := &Process{
		opts:   opts,
		output: procgroup.NewTail(opts.Output),
	}
	defer func() {
		if retErr != nil {
			retErr = errors.Join(retErr, p.Stop())
		}
	}()

	if err := os.MkdirAll(opts.WorkDir, 0o700); err != nil {
		return nil, fmt.Errorf("failed to create kube-controller-manager's work folder: %w", err)
	}
	kubeconfigPath := filepath.Join(opts.WorkDir, "kubeconfig")
	if err := kubeconfig.WriteFromREST(opts.Config, kubeconfigPath); err != nil {
		return nil, err
	}
	certDir := filepath.Join(opts.WorkDir, "certs")
	if err := opts.Certs.Write(certDir); err != nil {
		return nil, err
	}
	port, err := ports.One()
	if err != nil {
		return nil, err
	}
	p.healthAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))

	p.args = []string{
		"--kubeconfig=" + kubeconfigPath,
		// Delegated authentication (tokens only) and authorization of
		// /metrics go to the same apiserver; /healthz is always allowed.
		// Skipping the lookup of client CAs keeps its log free of errors
		// about the request-header CA our apiserver does not have.
		"--authentication-kubeconfig=" + kubeconfigPath,
		"--authentication-skip-lookup",
		"--authorization-kubeconfig=" + kubeconfigPath,
		"--controllers=" + strings.Join(opts.Controllers, ","),
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--tls-cert-file=" + filepath.Join(certDir, certs.CertFile),
		"--tls-private-key-file=" + filepath.Join(certDir, certs.KeyFile),
	}
	if p.sup, err = procgroup.Supervise(procgroup.SupervisorOptions{
		Name: BinaryName,
		Command: func() *exec.Cmd {
			cmd := exec.Command(p.opts.BinaryPath, p.args...)
			cmd.Dir = p.opts.WorkDir
			cmd.Stdout, cmd.Stderr = p.output, p.output
			return cmd
		},
		Restarts: opts.Restarts,
		OnStart:  opts.OnStart,
		OnExit:   opts.OnExit,
	}); err != nil {
		return nil, err
	}
	if err := p.waitHealthy(ctx); err != nil {
		return nil, err
	}
	p.sup.Ready()
	return p, nil
}

// withDefaults rejects missing options and fills in the defaults.
func withDefaults(opts Options) (Options, error) {
	switch {
	case opts.BinaryPath == "":
		return opts, errors.New("failed to start kube-controller-manager: Options.BinaryPath is required")
	case opts.Config == nil:
		return opts, errors.New("failed to start kube-controller-manager: Options.Config is required")
	case opts.WorkDir == "":
		return opts, errors.New("failed to start kube-controller-manager: Options.WorkDir is required")
	}
	if opts.Output == nil {
		opts.Output = io.Discard
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = DefaultStartTimeout
	}
	if len(opts.Controllers) == 0 {
		opts.Controllers = Controllers
	}
	if opts.Certs == nil {
		bundle, err := certs.New(certs.Options{CommonName: "capi-monolith-dev-kube-controller-manager-ca"})
		if err != nil {
			return opts, err
		}
		opts.Certs = bundle
	}
	return opts, nil
}

// waitHealthy polls /healthz over TLS, checking the serving certificate
// against Options.Certs, until it answers 200.
func (p *Process) waitHealthy(ctx context.Context) error {
	httpClient := &http.Client{
		Timeout:   time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: p.opts.Certs.CertPool(), MinVersion: tls.VersionTLS12}},
	}
	defer httpClient.CloseIdleConnections()
	healthz := "https://" + p.healthAddr + "/healthz"
	var lastErr error
	err := wait.PollUntilContextTimeout(ctx, pollInterval, p.opts.StartTimeout, true, func(ctx context.Context) (bool, error) {
		select {
		case <-p.sup.Exited():
			lastErr = nil
			return false, fmt.Errorf("the process exited before it was healthy: %w", p.sup.Err())
		default:
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, healthz, nil)
		if err != nil {
			return false, fmt.Errorf("failed to build the healthz request: %w", err)
		}
		resp, err := httpClient.Do(req)
		if err != nil {
			lastErr = err
			return false, nil
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			lastErr = fmt.Errorf("healthz: status %s", resp.Status)
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		if lastErr != nil {
			err = fmt.Errorf("%w (last check: %w)", err, lastErr)
		}
		return fmt.Errorf("failed to wait for kube-controller-manager to be healthy: %w\nlast output:\n%s", err, p.output.String())
	}
	return nil
}

// Stop ends the process: SIGTERM to its process group, SIGKILL after 10s
// (at once after Kill). It is safe to call more than once.
func (p *Process) Stop() error {
	if p == nil {
		return nil
	}
	p.stopOnce.Do(func() { p.stopErr = p.sup.Terminate(stopGracePeriod) })
	return p.stopErr
}

// Kill sends SIGKILL to the process group at once and keeps the process
// from being restarted; a Stop running or to come then does not wait for a
// graceful exit. For a second Ctrl-C.
func (p *Process) Kill() {
	if p == nil {
		return
	}
	p.sup.Kill()
}

// Exited is closed when the process has exited for good: stopped, or dead
// after its restarts.
func (p *Process) Exited() <-chan struct{} { return p.sup.Exited() }

// PID is the id of the current process, which is also its process group id.
func (p *Process) PID() int { return p.sup.PID() }

// HealthAddress is host:port of /healthz (HTTPS, Options.Certs).
func (p *Process) HealthAddress() string { return p.healthAddr }

// Output returns the process's last 200 lines of output.
func (p *Process) Output() string { return p.output.String() }
