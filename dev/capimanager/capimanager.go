package capimanager

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capi-monolith/capi-monolith/dev/capimodule"
	"github.com/capi-monolith/capi-monolith/dev/certs"
	"github.com/capi-monolith/capi-monolith/dev/crds"
	"github.com/capi-monolith/capi-monolith/dev/kubeconfig"
	"github.com/capi-monolith/capi-monolith/dev/ports"
	"github.com/capi-monolith/capi-monolith/dev/procgroup"
	"github.com/capi-monolith/capi-monolith/dev/toolcache"
	"github.com/capi-monolith/capi-monolith/dev/webhooks"
)

// Manager is one of Cluster API's own managers: where its binary, CRDs and
// webhook manifests are.
type Manager struct {
	toolcache.Binary
	// Name is short and unique: it names the manager's webhook
	// configurations, work folder and log ("core", "kubeadm-bootstrap",
	// "kubeadm-control-plane").
	Name string
	// Component is its folder in the pinned module, with its CRDs and
	// webhook manifests.
	Component capimodule.Component
	// ConcurrencyFlags are its controllers' --<name> concurrency flags in
	// the pinned release, which Tuning.Concurrency sets.
	ConcurrencyFlags []string
}

// The managers dev runs, each built by `make <MakeTarget>` (hack/build-capi.sh)
// into <cache>/<Folder>/<cluster-api version>/manager.
var (
	Core = Manager{
		Name: "core", Component: capimodule.Core,
		Binary: toolcache.Binary{Title: "Cluster API core manager", Folder: "capi-core", File: "manager",
			EnvVar: "CAPI_CORE_MANAGER", MakeTarget: "capi-core"},
		ConcurrencyFlags: []string{"cluster-concurrency", "clusterclass-concurrency", "clustercache-concurrency",
			"clusterresourceset-concurrency", "clustertopology-concurrency", "extensionconfig-concurrency",
			"machine-concurrency", "machinedeployment-concurrency", "machinehealthcheck-concurrency",
			"machinepool-concurrency", "machineset-concurrency"},
	}
	KubeadmBootstrap = Manager{
		Name: "kubeadm-bootstrap", Component: capimodule.KubeadmBootstrap,
		Binary: toolcache.Binary{Title: "Cluster API kubeadm bootstrap manager", Folder: "capi-kubeadm-bootstrap", File: "manager",
			EnvVar: "CAPI_KUBEADM_BOOTSTRAP_MANAGER", MakeTarget: "capi-kubeadm-bootstrap"},
		ConcurrencyFlags: []string{"clustercache-concurrency", "kubeadmconfig-concurrency"},
	}
	KubeadmControlPlane = Manager{
		Name: "kubeadm-control-plane", Component: capimodule.KubeadmControlPlane,
		Binary: toolcache.Binary{Title: "Cluster API kubeadm control plane manager", Folder: "capi-kubeadm-control-plane", File: "manager",
			EnvVar: "CAPI_KUBEADM_CONTROL_PLANE_MANAGER", MakeTarget: "capi-kubeadm-control-plane"},
		ConcurrencyFlags: []string{"clustercache-concurrency", "kubeadmcontrolplane-concurrency"},
	}
)

// All are the managers a dev environment runs, core first.
func All() []Manager { return []Manager{Core, KubeadmBootstrap, KubeadmControlPlane} }

const (
	// DefaultFeatureGates are the gates Cluster API's own e2e configuration
	// (test/e2e/config/docker.yaml of the pinned release) turns on; the ones
	// it turns on that are on by default anyway (MachineSetPreflightChecks,
	// PriorityQueue, ReconcilerRateLimiting) are left to their default.
	// Every manager gets the same gates (the kubeadm bootstrap provider's
	// MachinePool support among them), as clusterctl's EXP_ variables give
	// them to every provider. FeatureGates adds to them.
	DefaultFeatureGates = "ClusterTopology=true,InPlaceUpdates=true,KubeadmBootstrapFormatIgnition=true,MachinePool=true,MachineTaintPropagation=true,RuntimeSDK=true"
	// DefaultStartTimeout bounds Start's wait for the process to be ready.
	DefaultStartTimeout = 60 * time.Second

	// stopGracePeriod is how long Stop waits after SIGTERM before SIGKILL;
	// Cluster API's managers shut their controllers down well within it.
	stopGracePeriod = 10 * time.Second
	// cleanupTimeout bounds the API calls of Stop and of a failed Start.
	cleanupTimeout = 30 * time.Second
	pollInterval   = 100 * time.Millisecond
)

// Options configures Start.
type Options struct {
	// Manager is the manager to run. Required.
	Manager Manager

	// Config is the admin config of the apiserver. Required.
	Config *rest.Config

	// BinaryPath is the manager's binary. Default: $<Manager.EnvVar>, else
	// <toolcache.Dir>/<Manager.Folder>/<cluster-api version>/manager, the
	// file `make <Manager.MakeTarget>` builds.
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

	// Certs are the webhook server's CA and serving certificate.
	// Default: a new bundle.
	Certs *certs.Bundle

	// WebhookConfigurationName names both webhook configurations Start
	// installs; existing ones of that name are replaced.
	// Default: "capi<Manager.Name>-<random>", unique per process.
	WebhookConfigurationName string

	// Restarts is how many times a process that exits after it was ready is
	// started again before it is left dead (and Exited closes).
	// Default: 0, never.
	Restarts int

	// OnExit, when set, is called each time the process exits unexpectedly
	// after it was ready, with the exit error and whether it is restarted.
	OnExit func(err error, restarting bool)

	// Owner, when set, marks the webhook configurations Start installs as
	// installed by dev and owned by this process (see webhooks.Mark), so
	// that a later dev can undo them should this process be killed.
	Owner string

	// OnStart, when set, is called with the process id each time the
	// process is started (restarts included), e.g. to record it for a later
	// start to find should this one be killed.
	OnStart func(pid int)
}

// Process is a running Cluster API manager.
type Process struct {
	opts        Options
	binary      string
	args        []string
	output      *procgroup.Tail
	client      client.Client
	webhooks    *webhooks.Configurations
	conversions []webhooks.ConversionPatch
	convertURL  string
	certs       *certs.Bundle

	webhookAddr     string
	healthAddr      string
	diagnosticsAddr string
	workDir         string
	removeWorkDir   bool

	// sup runs the process; nil until it started.
	sup *procgroup.Supervisor

	stopOnce sync.Once
	stopErr  error
}

// Start installs the manager's webhook configurations and points the
// conversion of its CRDs at a new process, runs the process and waits until
// it is ready: /readyz answers 200 and the webhook port serves the
// certificate of opts.Certs. ctx bounds Start only; the process runs until
// Stop.
func Start(ctx context.Context, opts Options) (_ *Process, retErr error) {
	opts, err := withDefaults(opts)
	if err != nil {
		return nil, err
	}
	capi, err := capimodule.Locate()
	if err != nil {
		return nil, err
	}
	binary, err := opts.Manager.Find(opts.BinaryPath, "", capi.Version)
	if err != nil {
		return nil, err
	}

	p := &Process{
		opts:   opts,
		binary: binary,
		output: procgroup.NewTail(opts.Output),
		certs:  opts.Certs,
	}
	// On failure, undo whatever was done so far, the process included.
	defer func() {
		if retErr != nil {
			retErr = errors.Join(retErr, p.Stop())
		}
	}()
	files, err := p.prepareWorkDir()
	if err != nil {
		return nil, err
	}
	if p.client, err = newClient(opts.Config); err != nil {
		return nil, err
	}
	if err := p.installWebhooks(ctx, capi); err != nil {
		return nil, err
	}
	if err := p.run(ctx, files); err != nil {
		return nil, err
	}
	return p, nil
}

// withDefaults rejects missing options and fills in the defaults.
func withDefaults(opts Options) (Options, error) {
	if opts.Manager.Name == "" {
		return opts, fmt.Errorf("failed to start a Cluster API manager: Options.Manager is required")
	}
	if opts.Config == nil {
		return opts, fmt.Errorf("failed to start %s: Options.Config is required", opts.Manager.Title)
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
	return opts, nil
}

// workFiles are what the process reads from its work folder, and its
// webhook port.
type workFiles struct {
	kubeconfigPath string
	certDir        string
	webhookPort    int
}

// prepareWorkDir makes the work folder with the kubeconfig and the serving
// certificate the process reads, and picks its ports.
func (p *Process) prepareWorkDir() (workFiles, error) {
	var err error
	p.workDir = p.opts.WorkDir
	if p.workDir == "" {
		if p.workDir, err = os.MkdirTemp("", "capi"+p.opts.Manager.Name+"-"); err != nil {
			return workFiles{}, fmt.Errorf("failed to create the work folder: %w", err)
		}
		p.removeWorkDir = true
	} else if err := os.MkdirAll(p.workDir, 0o700); err != nil {
		return workFiles{}, fmt.Errorf("failed to create the work folder: %w", err)
	}
	files := workFiles{kubeconfigPath: filepath.Join(p.workDir, "kubeconfig"), certDir: filepath.Join(p.workDir, "certs")}
	if err := kubeconfig.WriteFromREST(p.opts.Config, files.kubeconfigPath); err != nil {
		return workFiles{}, err
	}
	if p.certs == nil {
		if p.certs, err = certs.New(certs.Options{}); err != nil {
			return workFiles{}, err
		}
	}
	if err := p.certs.Write(files.certDir); err != nil {
		return workFiles{}, err
	}
	free, err := ports.Free(3)
	if err != nil {
		return workFiles{}, err
	}
	files.webhookPort = free[0]
	p.webhookAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(files.webhookPort))
	p.healthAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(free[1]))
	p.diagnosticsAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(free[2]))
	return files, nil
}

// installWebhooks installs the manager's webhook configurations and points
// the conversion of its CRDs at the process to come.
func (p *Process) installWebhooks(ctx context.Context, capi capimodule.Module) error {
	opts := p.opts
	name := opts.WebhookConfigurationName
	if name == "" {
		id, err := randomID()
		if err != nil {
			return err
		}
		name = "capi" + opts.Manager.Name + "-" + id
	}
	baseURL := "https://" + p.webhookAddr
	manifestsFile := capi.ComponentWebhookManifests(opts.Manager.Component)
	manifests, err := os.ReadFile(manifestsFile)
	if err != nil {
		return fmt.Errorf("failed to read the webhook manifests of %s: %w", opts.Manager.Title, err)
	}
	wh, err := webhooks.Read(manifests, manifestsFile, name, baseURL, p.certs.CAPEM)
	if err != nil {
		return err
	}
	if opts.Owner != "" {
		wh.Mark(opts.Owner)
	}
	names, err := crds.Names(capi.ComponentCRDDirectory(opts.Manager.Component))
	if err != nil {
		return err
	}

	// Webhooks and conversion are in place before the process starts: the
	// apiserver has seen them by the time the process is ready, so the first
	// object a client creates is already defaulted and validated by it.
	if err := wh.Apply(ctx, p.client); err != nil {
		return err
	}
	p.webhooks = wh
	p.convertURL = baseURL + "/convert"
	p.conversions, err = webhooks.UseConversionWebhook(ctx, p.client, names, p.convertURL, p.certs.CAPEM)
	return err
}

// run starts the supervised process and waits until it is ready.
func (p *Process) run(ctx context.Context, files workFiles) error {
	opts := p.opts
	p.args = append([]string{
		"--kubeconfig=" + files.kubeconfigPath,
		"--leader-elect=false",
		"--webhook-port=" + strconv.Itoa(files.webhookPort),
		"--webhook-cert-dir=" + files.certDir,
		"--health-addr=" + p.healthAddr,
		"--diagnostics-address=" + p.diagnosticsAddr,
		"--insecure-diagnostics",
		"--feature-gates=" + opts.FeatureGates,
	}, opts.ExtraArgs...)
	var err error
	if p.sup, err = procgroup.Supervise(procgroup.SupervisorOptions{
		Name:     opts.Manager.Title,
		Command:  p.newCmd,
		Restarts: opts.Restarts,
		OnStart:  opts.OnStart,
		OnExit:   opts.OnExit,
	}); err != nil {
		return err
	}
	if err := p.waitReady(ctx, opts.StartTimeout); err != nil {
		return err
	}
	p.sup.Ready()
	return nil
}

func (p *Process) newCmd() *exec.Cmd {
	cmd := exec.Command(p.binary, p.args...)
	cmd.Dir = p.workDir
	cmd.Stdout = p.output
	cmd.Stderr = p.output
	return cmd
}

func (p *Process) waitReady(ctx context.Context, timeout time.Duration) error {
	roots := p.certs.CertPool()
	httpClient := &http.Client{Timeout: time.Second}
	readyz := "http://" + p.healthAddr + "/readyz"

	var lastErr error
	err := wait.PollUntilContextTimeout(ctx, pollInterval, timeout, true, func(ctx context.Context) (bool, error) {
		select {
		case <-p.sup.Exited():
			// The last check failed because the process was going away.
			lastErr = nil
			return false, fmt.Errorf("failed to start: the process exited before it was ready: %w", p.sup.Err())
		default:
		}
		if lastErr = checkReadyz(ctx, httpClient, readyz); lastErr != nil {
			return false, nil
		}
		if lastErr = webhooks.CheckTLS(ctx, p.webhookAddr, roots); lastErr != nil {
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		if lastErr != nil {
			err = fmt.Errorf("%w (last check: %w)", err, lastErr)
		}
		return fmt.Errorf("failed to wait for %s to be ready: %w\nlast output:\n%s", p.opts.Manager.Title, err, p.output.String())
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

// Stop ends the process (SIGTERM to its process group, SIGKILL after 10s),
// deletes its webhook configurations, gives the manager's CRDs back the
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
				if err := p.webhooks.Delete(ctx, p.client); err != nil {
					errs = append(errs, err)
				}
			}
			if err := webhooks.RestoreConversion(ctx, p.client, p.conversions, p.convertURL); err != nil {
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
	// The process group is signalled, so that nothing the manager started
	// outlives it.
	return p.sup.Terminate(stopGracePeriod)
}

// Kill sends SIGKILL to the process group at once and keeps it from being
// restarted; a Stop running or to come then does not wait for a graceful
// exit, and still removes what Start installed. For a second Ctrl-C.
func (p *Process) Kill() {
	if p == nil {
		return
	}
	p.sup.Kill()
}

// Exited is closed when the process has exited for good: stopped, or dead
// after its restarts.
func (p *Process) Exited() <-chan struct{} { return p.sup.Exited() }

// Err is the process's exit error (nil for a clean exit) once Exited is
// closed, and nil before.
func (p *Process) Err() error { return p.sup.Err() }

// PID is the id of the current process, which is also its process group id.
func (p *Process) PID() int { return p.sup.PID() }

// Output returns the process's last 200 lines of output.
func (p *Process) Output() string { return p.output.String() }

// Manager is the manager the process runs.
func (p *Process) Manager() Manager { return p.opts.Manager }

// WebhookAddress is host:port of the manager's webhook server (HTTPS).
func (p *Process) WebhookAddress() string { return p.webhookAddr }

// HealthAddress is host:port of the manager's /healthz and /readyz (HTTP).
func (p *Process) HealthAddress() string { return p.healthAddr }

// DiagnosticsAddress is host:port of the manager's /metrics (HTTP, no auth).
func (p *Process) DiagnosticsAddress() string { return p.diagnosticsAddr }

// WebhookConfigurationName is the name of both the Mutating- and the
// ValidatingWebhookConfiguration Start installed.
func (p *Process) WebhookConfigurationName() string { return p.webhooks.Mutating.Name }

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

func randomID() (string, error) {
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("failed to generate a name: %w", err)
	}
	return hex.EncodeToString(b), nil
}
