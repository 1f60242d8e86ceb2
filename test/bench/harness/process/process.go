package process

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/rest"

	"github.com/capi-monolith/capi-monolith/dev/certs"
	"github.com/capi-monolith/capi-monolith/dev/ports"
	"github.com/capi-monolith/capi-monolith/test/bench/harness"
	"github.com/capi-monolith/capi-monolith/test/bench/harness/memstat"
	"github.com/capi-monolith/capi-monolith/test/envtest"
)

const (
	// readyTimeout bounds the wait for /readyz after the process starts.
	readyTimeout = 2 * time.Minute
)

// StopGracePeriod is how long a stopping process gets before it is killed:
// a Pod's default terminationGracePeriodSeconds.
const StopGracePeriod = 30 * time.Second

// ErrKilledAfterGrace is what Stop returns (wrapped) for a process that did
// not exit within its grace period after SIGTERM and was killed, as a
// kubelet kills a Pod's container: how the process stopped, not a failure
// of what it did before.
var ErrKilledAfterGrace = errors.New("killed after its grace period")

// Build compiles the binary from the repository's root into dir and returns
// its path. Benchmarks build once and start it many times.
func Build(ctx context.Context, dir string) (string, error) {
	root, err := harness.RepoRoot()
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "capi-monolith")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", path, ".")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("failed to build capi-monolith: %w\n%s", err, out)
	}
	return path, nil
}

// Options configure Start.
type Options struct {
	// Binary is the path Build returned.
	Binary string
	// Config is the apiserver the process talks to, with admin credentials.
	Config *rest.Config
	// Dir holds the process's kubeconfig, webhook certificates and log
	// (log.txt, kept for reading after a failed run).
	Dir string
	// Args are the manager's flags (e.g. --enable-modules=ipam); Start adds
	// --kubeconfig, free loopback ports for webhooks, health and
	// diagnostics, and the webhook certificates.
	Args []string
	// DiagnosticsToken is a bearer token allowed to read /metrics and
	// /debug/pprof/* (see GrantDiagnostics).
	DiagnosticsToken string

	// For a peer provider's manager (Cluster API's flags, not ours):
	// Name names it in errors (default "capi-monolith"); Kubeconfig, when
	// set, is used instead of one written from Config; HealthFlag names
	// its health address flag (default --health-addr); NoDiagnostics
	// turns its diagnostics endpoint off (--diagnostics-address=0); Env is
	// added to this process's environment.
	Name          string
	Kubeconfig    string
	HealthFlag    string
	NoDiagnostics bool
	Env           []string
}

// Process is a running capi-monolith.
type Process struct {
	name    string
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error
	log     string
	health  string
	Diagnostics
}

// Start writes the process's kubeconfig and webhook certificates into
// opts.Dir, starts it and waits until its /readyz answers 200.
func Start(ctx context.Context, opts Options) (*Process, error) {
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("failed to create %s: %w", opts.Dir, err)
	}
	if opts.Name == "" {
		opts.Name = "capi-monolith"
	}
	if opts.HealthFlag == "" {
		opts.HealthFlag = "--health-addr"
	}
	kubeconfig := opts.Kubeconfig
	if kubeconfig == "" {
		kubeconfig = filepath.Join(opts.Dir, "kubeconfig")
		if err := envtest.WriteKubeconfigFromREST(opts.Config, kubeconfig); err != nil {
			return nil, err
		}
	}
	certDir := filepath.Join(opts.Dir, "certs")
	if err := writeServingCert(certDir); err != nil {
		return nil, err
	}
	free, err := ports.Free(3)
	if err != nil {
		return nil, err
	}
	p := &Process{
		name:        opts.Name,
		exited:      make(chan struct{}),
		log:         filepath.Join(opts.Dir, "log.txt"),
		health:      fmt.Sprintf("127.0.0.1:%d", free[1]),
		Diagnostics: Diagnostics{Address: fmt.Sprintf("127.0.0.1:%d", free[2]), Token: opts.DiagnosticsToken},
	}
	diagnostics := p.Address
	if opts.NoDiagnostics {
		diagnostics, p.Diagnostics = "0", Diagnostics{}
	}
	args := append([]string{
		"--kubeconfig=" + kubeconfig,
		fmt.Sprintf("--webhook-port=%d", free[0]),
		"--webhook-cert-dir=" + certDir,
		opts.HealthFlag + "=" + p.health,
		"--diagnostics-address=" + diagnostics,
	}, opts.Args...)
	logFile, err := os.Create(p.log)
	if err != nil {
		return nil, fmt.Errorf("failed to create the process log: %w", err)
	}
	defer logFile.Close()
	p.cmd = exec.Command(opts.Binary, args...)
	if len(opts.Env) > 0 {
		p.cmd.Env = append(os.Environ(), opts.Env...)
	}
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("failed to start %s: %w", opts.Binary, err)
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		close(p.exited)
	}()
	if err := p.waitReady(ctx); err != nil {
		_ = p.Stop()
		return nil, err
	}
	return p, nil
}

func writeServingCert(dir string) error {
	ca, err := certs.NewCA("capi-monolith-bench")
	if err != nil {
		return err
	}
	pair, err := ca.Serving()
	if err != nil {
		return err
	}
	return pair.Write(dir, ca)
}

func (p *Process) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.health+"/readyz", nil)
		if err != nil {
			return err
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-p.exited:
			return fmt.Errorf("%s exited before it was ready (%v); its log:\n%s", p.name, p.waitErr, p.Log())
		case <-ctx.Done():
			return fmt.Errorf("%s not ready within %s; its log:\n%s", p.name, readyTimeout, p.Log())
		case <-tick.C:
		}
	}
}

// PID is the process's id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// LogFile is the file the process prints to.
func (p *Process) LogFile() string { return p.log }

// Log returns the end of what the process printed.
func (p *Process) Log() string {
	data, err := os.ReadFile(p.log)
	if err != nil {
		return err.Error()
	}
	const tail = 4000
	if len(data) > tail {
		data = data[len(data)-tail:]
	}
	return string(data)
}

// Memory returns the process's resident memory now (VmRSS) and at its peak
// (VmHWM).
func (p *Process) Memory() (memstat.Status, error) {
	return memstat.ReadProcess(p.PID())
}

// CPU returns the CPU time the process has used so far.
func (p *Process) CPU() (time.Duration, error) {
	return harness.ProcessCPU(p.PID())
}

// Stop sends SIGTERM, as Kubernetes does, and kills the process if it has
// not exited within StopGracePeriod. An exit caused by the signal is not an
// error.
func (p *Process) Stop() error {
	select {
	case <-p.exited:
		return p.exitError()
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return p.exitError()
	case <-time.After(StopGracePeriod):
		_ = p.cmd.Process.Kill()
		<-p.exited
		return fmt.Errorf("%s did not stop within %s of SIGTERM: %w", p.name, StopGracePeriod, ErrKilledAfterGrace)
	}
}

func (p *Process) exitError() error {
	var exit *exec.ExitError
	if p.waitErr == nil || (errors.As(p.waitErr, &exit) && exit.ExitCode() == 0) {
		return nil
	}
	if errors.As(p.waitErr, &exit) {
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGTERM {
			return nil
		}
	}
	return fmt.Errorf("%s exited with %v; its log:\n%s", p.name, p.waitErr, p.Log())
}

// Diagnostics is a capi-monolith's secure diagnostics endpoint (metrics
// and pprof), read with a bearer token (see GrantDiagnostics). A Process
// has one; a benchmark that runs the binary another way (dev) makes one.
type Diagnostics struct {
	// Address is host:port of the endpoint (--diagnostics-address).
	Address string
	Token   string
}

// diagnosticsClient trusts any certificate: the endpoint serves a
// self-signed one that controller-runtime makes at start-up, and only
// loopback is reached.
var diagnosticsClient = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // loopback, self-signed

// get reads one path of the diagnostics endpoint with the bearer token.
func (d Diagnostics) get(ctx context.Context, path string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+d.Address+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+d.Token)
	resp, err := diagnosticsClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("failed to read %s from the diagnostics endpoint: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("failed to read %s from the diagnostics endpoint: %s", path, resp.Status)
	}
	return resp, nil
}

// String names the process in reports.
func (p *Process) String() string {
	return fmt.Sprintf("capi-monolith %s (pid %d)", strings.Join(p.cmd.Args[1:], " "), p.PID())
}
