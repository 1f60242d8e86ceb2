package dev

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net"
	"os"
	"path"
	"path/filepath"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"

	"github.com/capi-monolith/capi-monolith/dev/capimanager"
	"github.com/capi-monolith/capi-monolith/dev/capimodule"
	"github.com/capi-monolith/capi-monolith/dev/certs"
	"github.com/capi-monolith/capi-monolith/dev/controllermanager"
	"github.com/capi-monolith/capi-monolith/dev/controlplane"
	"github.com/capi-monolith/capi-monolith/dev/crds"
	"github.com/capi-monolith/capi-monolith/dev/inventory"
	"github.com/capi-monolith/capi-monolith/dev/progress"
	"github.com/capi-monolith/capi-monolith/dev/state"
	"github.com/capi-monolith/capi-monolith/dev/webhooks"
	"github.com/capi-monolith/capi-monolith/manager"
	"github.com/capi-monolith/capi-monolith/manifests"
	"github.com/capi-monolith/capi-monolith/modules"
	"github.com/capi-monolith/capi-monolith/runtimeext"
)

const (
	// DefaultExtensionConfigName names the ExtensionConfig registering the
	// runtimeext module with Cluster API core.
	DefaultExtensionConfigName = "capi-monolith"

	// webhookConfigurationPrefix names the webhook configurations dev
	// installs: <prefix><Cluster API manager> (core, kubeadm-bootstrap,
	// kubeadm-control-plane) and <prefix><module>.
	webhookConfigurationPrefix = "capi-monolith-dev-"
	managerReadyTimeout        = 60 * time.Second
	// managerRestarts is how often a Cluster API manager that dies is
	// started again before dev gives up.
	managerRestarts = 3
	stopTimeout     = 30 * time.Second
	loopback        = "127.0.0.1"

	// TempStatePrefix starts the name of a temporary state folder (in
	// os.TempDir()); a start removes those a killed dev left.
	TempStatePrefix = "capi-monolith-dev-"
)

// Options configures Start. The zero value starts a temporary environment
// with every module.
type Options struct {
	// Kubeconfig names an existing cluster to use instead of starting etcd,
	// kube-apiserver and kube-controller-manager. Default: start them.
	Kubeconfig string

	// DataDir keeps the environment's state (etcd's data, certificates,
	// logs), so that a later Start on it resumes where this one stopped.
	// Default: a temporary folder removed by Stop.
	DataDir string

	// Ephemeral makes DataDir (which must then be set) temporary: etcd's
	// data is not kept in it and Stop removes it. For callers that want the
	// state folder before Start, e.g. for their own logs.
	Ephemeral bool

	// KubeconfigOut is where the admin kubeconfig is written once the
	// environment is ready. Default: only <state>/kubeconfig.
	KubeconfigOut string

	// CacheDir is the project's tool cache (envtest binaries, Cluster
	// API's managers, clusterctl). Default: toolcache.Dir().
	CacheDir string

	// Binaries are the binaries of Cluster API's managers, by
	// capimanager.Manager.Name. Default: the cached ones (see
	// toolcache.Binary.Find).
	Binaries map[string]string

	// Modules are the modules to run, built with their typed options (for
	// example infra.New(infra.DefaultOptions())), in set-up order;
	// required. The runtimeext module's own ExtensionConfig registration is
	// turned off: dev registers the extension itself (see
	// DefaultExtensionConfigName).
	Modules []modules.Module

	// Manager are the manager's options. Default: DefaultManagerOptions.
	// Dev sets the webhook server and turns leader election off whatever
	// they say.
	Manager *manager.Options

	// Progress shows the steps. Default: none.
	Progress *progress.Display

	// LogOutput receives the output of Cluster API's managers and of
	// kube-controller-manager. Default: one file each,
	// <state>/logs/capi-<name>.log (capi-core.log,
	// capi-kubeadm-bootstrap.log, capi-kubeadm-control-plane.log) and
	// <state>/logs/kube-controller-manager.log.
	LogOutput io.Writer

	// ExtensionConfigName names the ExtensionConfig of the runtime
	// extension. Default: DefaultExtensionConfigName.
	ExtensionConfigName string

	// FeatureGates is the --feature-gates of Cluster API's managers (see
	// capimanager.FeatureGates). Default: capimanager.DefaultFeatureGates.
	FeatureGates string

	// CAPITuning are Cluster API's managers' rate limits, concurrency and
	// resync period. Zero fields keep the managers' own defaults.
	CAPITuning capimanager.Tuning
}

// Environment is a running dev management cluster.
type Environment struct {
	// Config is the admin config of the apiserver.
	Config *rest.Config
	// Client is an uncached client with the manager's scheme plus Cluster
	// API's (kubeadm bootstrap and control plane included) and
	// apiextensions' types.
	Client client.Client
	// Scheme is Client's scheme.
	Scheme *runtime.Scheme
	// StateDir holds the environment's state (DataDir, or a temporary folder).
	StateDir string
	// KubeconfigPath is the admin kubeconfig (Options.KubeconfigOut when set).
	KubeconfigPath string
	// WebhookAddress is host:port of this binary's webhook server, which
	// also serves the runtime extension.
	WebhookAddress string
	// Managers are Cluster API's managers, each a supervised child process,
	// in the order of capimanager.All(): core, kubeadm bootstrap, kubeadm
	// control plane.
	Managers []*capimanager.Process
	// Core is Cluster API core's, the first of Managers.
	Core *capimanager.Process
	// ControllerManager is kube-controller-manager (garbage collector and
	// namespace controller), a supervised child process; nil with an
	// existing cluster, which runs its own, and when the envtest assets
	// given by KUBEBUILDER_ASSETS have none.
	ControllerManager *controllermanager.Process
	// Clusterctl is the clusterctl of the tool cache built from the pinned
	// module (`make clusterctl`), or empty when it is not built.
	Clusterctl string
	// Modules are the enabled modules.
	Modules []string
	// Certs are the CA and serving certificate of every webhook server
	// (ours and the Cluster API managers').
	Certs *certs.Bundle

	opts           Options
	controlPlane   *controlplane.ControlPlane
	ourWebhooks    []*webhooks.Configurations
	tempState      bool
	managerCancel  context.CancelFunc
	managerDone    chan error
	failed         chan error
	failOnce       sync.Once
	stopOnce       sync.Once
	stopErr        error
	extensionOwned bool
	managerLogs    []*os.File
	lock           *state.Lock
	// owner names this process on what it installs (webhooks.Mark).
	owner string
	// force is closed by Kill: Stop no longer waits for graceful exits.
	force     chan struct{}
	forceOnce sync.Once
}

// Failed receives one error when a part of the environment stopped on its
// own for good (a Cluster API manager after its restarts, or ours); the
// environment is then broken and should be stopped.
func (e *Environment) Failed() <-chan error { return e.failed }

func (e *Environment) fail(err error) {
	e.failOnce.Do(func() { e.failed <- err })
}

// DefaultManagerOptions are the manager's defaults for the given modules,
// with the health and diagnostics listeners off.
func DefaultManagerOptions(mods []modules.Module) manager.Options {
	names := make([]string, 0, len(mods))
	for _, m := range mods {
		names = append(names, m.Name())
	}
	opts := manager.DefaultOptions(names...)
	opts.HealthAddr = "0"
	opts.Diagnostics.DiagnosticsAddress = "0"
	opts.Diagnostics.InsecureDiagnostics = true
	// Every listener of ours on loopback unless the caller says otherwise
	// (--webhook-host): a dev environment has no authentication worth the
	// name on the network.
	opts.WebhookHost = loopback
	return opts
}

// callHost is the host the apiserver and core call our webhook server at
// when it binds to host: loopback for loopback and every-interface
// addresses, else host itself.
func callHost(host string) string {
	if host == "" || host == "localhost" {
		return loopback
	}
	if ip := net.ParseIP(host); ip != nil && (ip.IsLoopback() || ip.IsUnspecified()) {
		return loopback
	}
	return host
}

func controlPlaneStepName(existing string) string {
	if existing != "" {
		return "existing cluster from " + existing
	}
	return "etcd and kube-apiserver " + controlplane.KubernetesVersion
}

func stateDir(dataDir string) (dir string, temp bool, err error) {
	if dataDir != "" {
		abs, err := filepath.Abs(dataDir)
		if err != nil {
			return "", false, fmt.Errorf("failed to resolve --data-dir %s: %w", dataDir, err)
		}
		if err := os.MkdirAll(abs, 0o700); err != nil {
			return "", false, fmt.Errorf("failed to create the data folder: %w", err)
		}
		return abs, false, nil
	}
	dir, err = os.MkdirTemp("", TempStatePrefix)
	if err != nil {
		return "", false, fmt.Errorf("failed to create a temporary state folder: %w", err)
	}
	return dir, true, nil
}

// dataDirOrEmpty keeps etcd's data in the state folder, synced to disk, only
// when it is meant to survive.
func dataDirOrEmpty(dataDir, state string) string {
	if dataDir == "" {
		return ""
	}
	return state
}

// withoutRegistration turns the runtimeext module's own ExtensionConfig
// registration off: the module registers itself behind a Service, which dev
// does not have; dev registers the extension instead.
func withoutRegistration(mods []modules.Module) []modules.Module {
	out := make([]modules.Module, 0, len(mods))
	for _, m := range mods {
		if r, ok := m.(*runtimeext.Module); ok {
			m = r.WithoutRegistration()
		}
		out = append(out, m)
	}
	return out
}

func newScheme(enabled []modules.Module) (*runtime.Scheme, error) {
	scheme, err := manager.NewScheme(enabled)
	if err != nil {
		return nil, err
	}
	// The kubeadm providers' kinds too: dev runs their managers.
	for _, add := range []func(*runtime.Scheme) error{apiextensionsv1.AddToScheme, runtimev1.AddToScheme, bootstrapv1.AddToScheme, controlplanev1.AddToScheme, clusterctlv1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, fmt.Errorf("failed to build the scheme: %w", err)
		}
	}
	return scheme, nil
}

// installCRDs installs the CRDs of Cluster API's managers and every
// module's, enabled or not: a CRD without its controller is harmless, and a
// later start with more modules finds its types.
func installCRDs(ctx context.Context, cfg *rest.Config, capi capimodule.Module) error {
	var list []*apiextensionsv1.CustomResourceDefinition
	for _, m := range capimanager.All() {
		theirs, err := crds.ReadClusterAPI(capi.ComponentCRDDirectory(m.Component))
		if err != nil {
			return err
		}
		list = append(list, labelled(theirs, clusterAPIProvider(m.Component, capi.Version))...)
	}
	dirs, err := fs.Glob(manifests.FS, "*/crd")
	if err != nil {
		return fmt.Errorf("failed to list the embedded CRDs: %w", err)
	}
	for _, dir := range dirs {
		ours, err := crds.ReadFS(manifests.FS, dir)
		if err != nil {
			return err
		}
		if p, ok := ownProvider(path.Dir(dir), DefaultProviderVersion); ok {
			ours = labelled(ours, p)
		}
		list = append(list, ours...)
	}
	return crds.Install(ctx, cfg, list)
}

// components are the pinned module's components of the managers.
func components(managers []capimanager.Manager) []capimodule.Component {
	out := make([]capimodule.Component, len(managers))
	for i, m := range managers {
		out[i] = m.Component
	}
	return out
}

// labelled gives the CRDs the labels clusterctl init gives a provider's
// components: clusterctl move and Cluster API's e2e framework find the
// kinds to move, dump and check by them.
func labelled(list []*apiextensionsv1.CustomResourceDefinition, p inventory.Provider) []*apiextensionsv1.CustomResourceDefinition {
	for _, crd := range list {
		if crd.Labels == nil {
			crd.Labels = map[string]string{}
		}
		maps.Copy(crd.Labels, p.Labels())
	}
	return list
}

// startManager installs the enabled modules' webhook configurations, then
// builds and starts the one manager, and waits until its webhook server
// serves and its cache is synced.
func (e *Environment) startManager(ctx context.Context, opts manager.Options, enabled []modules.Module) error {
	baseURL := "https://" + e.WebhookAddress
	for _, m := range enabled {
		file := path.Join(m.Name(), "webhook", "manifests.yaml")
		data, err := fs.ReadFile(manifests.FS, file)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("failed to read the embedded %s: %w", file, err)
		}
		wh, err := webhooks.Read(data, file, webhookConfigurationPrefix+m.Name(), baseURL, e.Certs.CAPEM)
		if err != nil {
			return err
		}
		wh.Mark(e.owner)
		if err := wh.Apply(ctx, e.Client); err != nil {
			return err
		}
		e.ourWebhooks = append(e.ourWebhooks, wh)
	}

	log := ctrl.Log.WithName("dev")
	mgr, err := manager.New(ctrl.LoggerInto(ctx, log), e.Config, opts, enabled...)
	if err != nil {
		return err
	}
	mgrCtx, cancel := context.WithCancel(context.Background())
	e.managerCancel = cancel
	e.managerDone = make(chan error, 1)
	go func() {
		err := mgr.Start(mgrCtx)
		if mgrCtx.Err() == nil {
			// It stopped on its own: nothing reconciles any more.
			e.fail(fmt.Errorf("capi-monolith's manager stopped: %w", err))
		}
		e.managerDone <- err
	}()

	roots := e.Certs.CertPool()
	var lastErr error
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, managerReadyTimeout, true, func(ctx context.Context) (bool, error) {
		select {
		case err := <-e.failed:
			// Put it back for Failed's readers, and stop waiting.
			e.failed <- err
			return false, err
		default:
		}
		lastErr = webhooks.CheckTLS(ctx, e.WebhookAddress, roots)
		return lastErr == nil, nil
	})
	if err != nil {
		if lastErr != nil {
			err = fmt.Errorf("%w (last check: %w)", err, lastErr)
		}
		return fmt.Errorf("failed to wait for capi-monolith's webhook server: %w", err)
	}
	syncCtx, cancelSync := context.WithTimeout(ctx, managerReadyTimeout)
	defer cancelSync()
	if !mgr.GetCache().WaitForCacheSync(syncCtx) {
		return fmt.Errorf("failed to sync capi-monolith's cache within %s", managerReadyTimeout)
	}
	return nil
}

// registerExtension creates (or updates) the ExtensionConfig pointing Cluster
// API core at the runtime extension served by the modules' webhook server.
func (e *Environment) registerExtension(ctx context.Context) error {
	err := webhooks.ApplyExtensionConfig(ctx, e.Client, webhooks.ExtensionConfig{
		Name:     e.opts.ExtensionConfigName,
		URL:      "https://" + e.WebhookAddress,
		CABundle: e.Certs.CAPEM,
		Owner:    e.owner,
	})
	if err != nil {
		return err
	}
	e.extensionOwned = true
	return nil
}

// Stop stops our manager, Cluster API's and kube-controller-manager, removes
// what dev installed in an existing cluster (webhook configurations,
// conversion, the ExtensionConfig), stops etcd and kube-apiserver, and
// removes the state folder unless it is a --data-dir. Safe to call more
// than once.
func (e *Environment) Stop() error {
	e.stopOnce.Do(func() {
		var errs []error
		if e.managerCancel != nil {
			e.managerCancel()
			select {
			case err := <-e.managerDone:
				if err != nil {
					errs = append(errs, fmt.Errorf("capi-monolith's manager failed: %w", err))
				}
			case <-time.After(stopTimeout):
				errs = append(errs, fmt.Errorf("capi-monolith's manager did not stop within %s", stopTimeout))
			case <-e.force:
				// Its goroutines die with the process; what it may still
				// write to the apiserver is harmless.
			}
		}
		errs = append(errs, e.stopManagers()...)
		for _, f := range e.managerLogs {
			_ = f.Close()
		}
		// An apiserver of our own goes away with everything in it; an
		// existing cluster must not keep webhooks pointing at nothing.
		if e.Client != nil && e.controlPlane != nil && e.controlPlane.External {
			ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
			defer cancel()
			for _, wh := range e.ourWebhooks {
				if err := wh.Delete(ctx, e.Client); err != nil {
					errs = append(errs, err)
				}
			}
			if e.extensionOwned {
				ext := &runtimev1.ExtensionConfig{ObjectMeta: metav1.ObjectMeta{Name: e.opts.ExtensionConfigName}}
				if err := e.Client.Delete(ctx, ext); err != nil && !apierrors.IsNotFound(err) {
					errs = append(errs, fmt.Errorf("failed to delete ExtensionConfig %s: %w", ext.Name, err))
				}
			}
		}
		if e.controlPlane != nil {
			if err := e.controlPlane.Stop(); err != nil {
				errs = append(errs, err)
			}
		}
		if e.tempState && e.StateDir != "" {
			if err := os.RemoveAll(e.StateDir); err != nil {
				errs = append(errs, fmt.Errorf("failed to remove the state folder: %w", err))
			}
		} else if e.lock != nil {
			if err := e.lock.Release(); err != nil {
				errs = append(errs, err)
			}
		}
		e.stopErr = errors.Join(errs...)
	})
	return e.stopErr
}

// Cleanup undoes what a dev that did not stop cleanly left in the cluster of
// kubeconfig (`capi-monolith dev --cleanup --kubeconfig F`): the webhook
// configurations and ExtensionConfig it installed are deleted and Cluster
// API's CRDs get their conversion back. It refuses while a dev still uses
// the cluster. The CRDs themselves stay, as after a clean stop.
func Cleanup(ctx context.Context, kubeconfig string) (webhooks.Leftovers, error) {
	cp, err := controlplane.Start(ctx, controlplane.Options{Kubeconfig: kubeconfig})
	if err != nil {
		return webhooks.Leftovers{}, err
	}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, runtimev1.AddToScheme} {
		if err := add(scheme); err != nil {
			return webhooks.Leftovers{}, fmt.Errorf("failed to build the scheme: %w", err)
		}
	}
	c, err := client.New(cp.Config, client.Options{Scheme: scheme})
	if err != nil {
		return webhooks.Leftovers{}, fmt.Errorf("failed to create a client: %w", err)
	}
	return repair(ctx, c)
}

// repair is webhooks.Repair over everything dev installs in a cluster.
func repair(ctx context.Context, c client.Client) (webhooks.Leftovers, error) {
	return webhooks.Repair(ctx, c, state.Running, &runtimev1.ExtensionConfigList{})
}

// Kill makes a running or coming Stop quick, for a second Ctrl-C: Cluster
// API's managers, kube-apiserver and etcd get SIGKILL at once and Stop waits
// for no graceful exit. Stop still removes what dev installed and its state.
func (e *Environment) Kill() {
	e.forceOnce.Do(func() {
		close(e.force)
		for _, p := range e.Managers {
			p.Kill()
		}
		e.ControllerManager.Kill()
		e.controlPlane.Kill()
	})
}

// childOutput is where the output of a child process (a Cluster API
// manager, kube-controller-manager) goes, and how errors name it:
// Options.LogOutput, else <logDir>/<name>.log, which Stop closes.
func (e *Environment) childOutput(logDir, name, title string) (io.Writer, string, error) {
	if e.opts.LogOutput != nil {
		return e.opts.LogOutput, "Options.LogOutput", nil
	}
	path := filepath.Join(logDir, name+".log")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, "", fmt.Errorf("failed to open the log of %s: %w", title, err)
	}
	e.managerLogs = append(e.managerLogs, f)
	return f, path, nil
}

// stopManagers stops Cluster API's managers and kube-controller-manager
// side by side: each may take its grace period, and none needs another to
// stop.
func (e *Environment) stopManagers() []error {
	errs := make([]error, len(e.Managers)+1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		errs[len(e.Managers)] = e.ControllerManager.Stop()
	}()
	for i, p := range e.Managers {
		if p == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = p.Stop()
		}()
	}
	wg.Wait()
	return errs
}

// findControllerManager returns the kube-controller-manager beside
// kube-apiserver in the envtest assets folder. Assets the user gives with
// KUBEBUILDER_ASSETS (setup-envtest's have none) may lack it: dev then runs
// without it, and says what that costs. Our own cache must have it.
func findControllerManager(assets string, display *progress.Display) (string, error) {
	path, err := controllermanager.Find(assets)
	switch {
	case err == nil:
		return path, nil
	case errors.Is(err, fs.ErrNotExist) && os.Getenv("KUBEBUILDER_ASSETS") != "":
		display.Printf("  ! WARNING: KUBEBUILDER_ASSETS (%s) has no kube-controller-manager, so no garbage collector runs:\n"+
			"    the dependents of deleted objects (a deleted Cluster's Secrets, among them its kubeconfig) are not\n"+
			"    garbage-collected, and deleted namespaces stay Terminating. `make envtest-assets` builds one.\n", assets)
		return "", nil
	default:
		return "", fmt.Errorf("%w: run `make envtest-assets`, which builds it beside kube-apiserver", err)
	}
}

// record notes a child process in the state folder, so that the next start
// kills it should this dev die without stopping it (and without the
// parent-death signal, outside Linux).
func (e *Environment) record(name string, pid int) {
	if err := e.lock.Record(name, pid); err != nil {
		ctrl.Log.WithName("dev").Error(err, "Failed to record a child process", "process", name, "pid", pid)
	}
}

func capimoduleLocate() (string, error) {
	m, err := capimodule.Locate()
	return m.Version, err
}
