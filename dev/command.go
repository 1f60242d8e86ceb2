package dev

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/capi-monolith/capi-monolith/dev/access"
	"github.com/capi-monolith/capi-monolith/dev/capimanager"
	"github.com/capi-monolith/capi-monolith/dev/progress"
	"github.com/capi-monolith/capi-monolith/dev/state"
	"github.com/capi-monolith/capi-monolith/manager"
	"github.com/capi-monolith/capi-monolith/modules"
)

// DefaultKubeconfigOut is where `capi-monolith dev` writes the admin
// kubeconfig unless --kubeconfig-out says otherwise.
const DefaultKubeconfigOut = "capi-monolith.kubeconfig"

// CommandOptions are the flags of `capi-monolith dev` itself; the manager's
// flags are passed through to it.
type CommandOptions struct {
	Kubeconfig    string
	KubeconfigOut string
	DataDir       string
	Quiet         bool
	Verbosity     int
	Cleanup       bool
}

// Command returns `capi-monolith dev` for the modules of reg: it starts the
// environment, prints what to do next, and runs until ctx is cancelled
// (Ctrl-C) or a part of it fails, then stops everything.
//
// Signals: the first SIGINT or SIGTERM stops gracefully; the second makes
// the stop quick (SIGKILL to every child) but still removes what dev
// installed and its state folder; a third exits at once (the children die
// with dev by their parent-death signal, and the next start removes the
// state a killed dev left). The caller must not handle these signals too.
func Command(reg *modules.Registry) func(ctx context.Context, args []string) error {
	return func(ctx context.Context, args []string) error {
		signals := make(chan os.Signal, 3)
		signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
		defer signal.Stop(signals)
		return command(ctx, reg, args, os.Stdout, os.Stderr, signals)
	}
}

// command is Command with its outputs and signals given (nil: none).
func command(ctx context.Context, reg *modules.Registry, args []string, stdout, stderr io.Writer, signals <-chan os.Signal) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	force := watchSignals(ctx, cancel, signals, stderr)

	fl, err := parseFlags(reg, args, stderr)
	if err != nil || fl == nil {
		return err
	}
	if fl.opts.Cleanup {
		return cleanup(ctx, fl.opts.Kubeconfig, stderr)
	}
	run, err := fl.resolve()
	if err != nil {
		return err
	}

	var out io.Writer = stderr
	if fl.opts.Quiet {
		out = nil
	}
	display := progress.New(out)
	display.Printf("Starting a Cluster API management cluster (capi-monolith dev)\n")

	state, ephemeral := fl.opts.DataDir, false
	if state == "" {
		if state, err = os.MkdirTemp("", TempStatePrefix); err != nil {
			return fmt.Errorf("failed to create a temporary state folder: %w", err)
		}
		ephemeral = true
		// Start removes it on Stop, and on failure once it began; this
		// covers the failures before that.
		defer os.RemoveAll(state)
	} else {
		if err := secureDataDir(state); err != nil {
			return err
		}
	}
	logs, closeLogs, err := setUpLogging(state, fl.opts.Verbosity)
	if err != nil {
		return err
	}
	defer closeLogs()
	display.Printf("  logs: %s\n", filepath.Dir(logs))

	env, err := Start(ctx, Options{
		Kubeconfig:    fl.opts.Kubeconfig,
		DataDir:       state,
		Ephemeral:     ephemeral,
		KubeconfigOut: run.kubeconfigOut,
		Modules:       run.modules,
		Manager:       &fl.mgrOpts,
		Progress:      display,
		FeatureGates:  run.featureGates,
		CAPITuning:    fl.capiTuning,
	})
	if err != nil {
		return err
	}
	display.Printf("Ready in %s: Cluster API %s with modules %s.\n\n", display.Elapsed().Round(100*time.Millisecond), clusterAPIVersion(), strings.Join(env.Modules, ","))
	display.Printf("%s", nextSteps(env))
	// The kubeconfig path is what scripts wait for: always on stdout.
	fmt.Fprintf(stdout, "kubeconfig: %s\n", env.KubeconfigPath)
	return serve(ctx, env, force, display, ephemeral, run.kubeconfigOut)
}

// watchSignals counts the signals received: the first cancels ctx (a
// graceful stop), the second closes the returned channel (a quick stop),
// the third exits at once.
func watchSignals(ctx context.Context, cancel context.CancelFunc, signals <-chan os.Signal, stderr io.Writer) <-chan struct{} {
	force := make(chan struct{})
	if signals == nil {
		return force
	}
	go func() {
		received := 0
		for {
			select {
			case <-signals:
			case <-ctx.Done():
				if received == 0 {
					return
				}
				// Stopping: keep counting signals until the process ends.
				<-signals
			}
			received++
			switch received {
			case 1:
				cancel()
			case 2:
				close(force)
			default:
				fmt.Fprintf(stderr, "Exiting at once: the next capi-monolith dev removes what is left.\n")
				os.Exit(130)
			}
		}
	}()
	return force
}

// commandFlags are dev's command line, parsed.
type commandFlags struct {
	opts      CommandOptions
	capiGates map[string]bool
	// capiTuning are the managers' rate limits and concurrency.
	capiTuning capimanager.Tuning
	// mgrOpts are the manager's options, with dev's listener defaults.
	mgrOpts manager.Options
	bound   *modules.Bound
}

// parseFlags parses dev's flags, the manager's and the modules'; it returns
// nil and no error for --help.
func parseFlags(reg *modules.Registry, args []string, stderr io.Writer) (*commandFlags, error) {
	fl := &commandFlags{capiGates: map[string]bool{}}
	opts := &fl.opts
	fs := pflag.NewFlagSet("capi-monolith dev", pflag.ContinueOnError)
	fs.SetNormalizeFunc(cliflag.WordSepNormalizeFunc)
	fs.SetOutput(stderr)
	fs.StringVar(&opts.Kubeconfig, "kubeconfig", "",
		"Use the existing cluster of this kubeconfig instead of starting etcd, kube-apiserver and kube-controller-manager.")
	fs.StringVar(&opts.KubeconfigOut, "kubeconfig-out", DefaultKubeconfigOut,
		"Where to write the admin kubeconfig of the dev cluster.")
	fs.StringVar(&opts.DataDir, "data-dir", "",
		"Keep etcd's data, certificates and logs in this folder, so that the next start resumes where this one stopped. Without it everything is temporary and removed on exit.")
	fs.BoolVar(&opts.Quiet, "quiet", false, "Print no progress, only errors.")
	fs.BoolVar(&opts.Cleanup, "cleanup", false,
		"Undo what a dev that did not stop cleanly (kill -9, a crash) left, then exit: the temporary state folders and processes of killed dev runs, and with --kubeconfig what dev installed in that cluster (webhook configurations, the ExtensionConfig, Cluster API's CRD conversion). A start does the same first.")
	fs.Var(cliflag.NewMapStringBool(&fl.capiGates), "capi-feature-gates",
		"Feature gates of Cluster API's managers, set over dev's defaults ("+capimanager.DefaultFeatureGates+"), e.g. InPlaceUpdates=false.")
	bindTuningFlags(fs, &fl.capiTuning)
	fs.IntVarP(&opts.Verbosity, "v", "v", 0, "Log verbosity of capi-monolith's controllers (logs go to <data dir>/logs).")
	// The manager's and the modules' flags, into typed options for Start.
	// Dev's listener defaults apply unless a flag says otherwise.
	fl.mgrOpts = DefaultManagerOptions(nil)
	manager.BindFlags(fs, &fl.mgrOpts, reg.Names())
	fl.mgrOpts.HealthAddr, fl.mgrOpts.Diagnostics.DiagnosticsAddress, fl.mgrOpts.Diagnostics.InsecureDiagnostics = "0", "0", true
	fl.mgrOpts.WebhookHost = loopback
	fs.Lookup("health-addr").DefValue = "0"
	fs.Lookup("diagnostics-address").DefValue = "0"
	fs.Lookup("insecure-diagnostics").DefValue = "true"
	fs.Lookup("webhook-host").DefValue = loopback
	for _, name := range devOwnedManagerFlags {
		if err := fs.MarkHidden(name); err != nil {
			return nil, fmt.Errorf("failed to hide --%s: %w", name, err)
		}
	}
	fl.bound = reg.BindFlags(fs)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: capi-monolith dev [flags]\n\nStarts a whole Cluster API management cluster: etcd, kube-apiserver, kube-controller-manager (garbage collector, namespace controller), Cluster API's core, kubeadm bootstrap and kubeadm control plane managers, and capi-monolith's modules.\n\nFlags:\n%s", fs.FlagUsages())
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil, nil
		}
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var owned []string
	for _, name := range devOwnedManagerFlags {
		if fs.Changed(name) {
			owned = append(owned, "--"+name)
		}
	}
	if len(owned) > 0 {
		return nil, fmt.Errorf("%s cannot be set: dev picks a free webhook port, serves it with its own certificate and runs one replica without leader election", strings.Join(owned, ", "))
	}
	return fl, nil
}

// devOwnedManagerFlags are the manager's flags dev sets itself
// (setWebhookServer): they are hidden from dev's help and refused, rather
// than accepted and silently overridden.
var devOwnedManagerFlags = []string{"webhook-port", "webhook-cert-dir", "webhook-cert-name", "webhook-key-name", "leader-elect"}

// bindTuningFlags binds the knobs Cluster API's book tunes its managers
// with at scale; 0 keeps a manager's own default.
func bindTuningFlags(fs *pflag.FlagSet, t *capimanager.Tuning) {
	fs.Float32Var(&t.KubeAPIQPS, "capi-kube-api-qps", 0,
		"--kube-api-qps of Cluster API's managers: their client's queries per second to the management cluster (0: theirs, 100).")
	fs.IntVar(&t.KubeAPIBurst, "capi-kube-api-burst", 0,
		"--kube-api-burst of Cluster API's managers (0: theirs, 200).")
	fs.Float32Var(&t.ClusterCacheClientQPS, "capi-clustercache-client-qps", 0,
		"--clustercache-client-qps of Cluster API's managers: each workload cluster client's queries per second (0: theirs, 20).")
	fs.IntVar(&t.ClusterCacheClientBurst, "capi-clustercache-client-burst", 0,
		"--clustercache-client-burst of Cluster API's managers (0: theirs, 30).")
	fs.IntVar(&t.Concurrency, "capi-concurrency", 0,
		"Sets every controller concurrency flag of Cluster API's managers (--machine-concurrency, --kubeadmcontrolplane-concurrency, ...) to this (0: theirs, 10 to 100 by controller).")
	fs.DurationVar(&t.SyncPeriod, "capi-sync-period", 0,
		"--sync-period of Cluster API's managers (0: theirs, 10m).")
}

// runOptions are what Start is given beyond the parsed flags.
type runOptions struct {
	featureGates  string
	modules       []modules.Module
	kubeconfigOut string
}

// resolve checks the parsed flags and builds the enabled modules.
func (fl *commandFlags) resolve() (runOptions, error) {
	if fl.opts.KubeconfigOut == "" {
		return runOptions{}, errors.New("--kubeconfig-out must not be empty")
	}
	var run runOptions
	var err error
	if run.featureGates, err = capimanager.FeatureGates(fl.capiGates); err != nil {
		return runOptions{}, fmt.Errorf("invalid --capi-feature-gates: %w", err)
	}
	if err := fl.capiTuning.Validate(); err != nil {
		return runOptions{}, err
	}
	if err := fl.mgrOpts.Validate(); err != nil {
		return runOptions{}, err
	}
	if run.modules, err = fl.bound.Modules(fl.mgrOpts.EnableModules); err != nil {
		return runOptions{}, err
	}
	if run.kubeconfigOut, err = filepath.Abs(fl.opts.KubeconfigOut); err != nil {
		return runOptions{}, fmt.Errorf("failed to resolve --kubeconfig-out: %w", err)
	}
	return run, nil
}

// serve runs the environment until ctx ends (a first signal) or a part of
// it fails for good, then stops it; force (a second signal) makes the stop
// quick.
func serve(ctx context.Context, env *Environment, force <-chan struct{}, display *progress.Display, ephemeral bool, kubeconfigOut string) error {
	announceCtx, stopAnnouncing := context.WithCancel(ctx)
	defer stopAnnouncing()
	go func() {
		err := access.Announce(announceCtx, access.Options{Config: env.Config, Scheme: env.Scheme, Printf: display.Printf})
		if err != nil && announceCtx.Err() == nil {
			display.Printf("Workload clusters' endpoints will not be printed: %v\n", err)
		}
	}()

	stopped := make(chan struct{})
	go func() {
		select {
		case <-force:
			display.Printf("Stopping now (second signal): killing every child, then removing what dev installed ...\n")
			env.Kill()
		case <-stopped:
		}
	}()
	defer close(stopped)

	var runErr error
	select {
	case <-ctx.Done():
		display.Printf("\nStopping ...\n")
	case runErr = <-env.Failed():
		display.Printf("\nA part of the environment failed, stopping: %v\n", runErr)
	}
	stopping := time.Now()
	stopErr := env.Stop()
	if ephemeral {
		// The kubeconfig names an apiserver that is gone.
		_ = os.Remove(kubeconfigOut)
	}
	display.Printf("Stopped in %s.\n", time.Since(stopping).Round(100*time.Millisecond))
	return errors.Join(runErr, stopErr)
}

// secureDataDir makes --data-dir, or takes a reused one, before the log is
// written in it: a folder of another user is refused, a reused one of ours
// made private (Start's claim does it again, for callers of Start).
func secureDataDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("failed to create the data folder: %w", err)
	}
	return state.Secure(dir)
}

// cleanup is --cleanup.
func cleanup(ctx context.Context, kubeconfig string, out io.Writer) error {
	removed, err := state.CleanStale(os.TempDir(), TempStatePrefix)
	for _, dir := range removed {
		fmt.Fprintf(out, "Removed the state of a killed capi-monolith dev: %s\n", dir)
	}
	if err != nil || kubeconfig == "" {
		return err
	}
	left, err := Cleanup(ctx, kubeconfig)
	if left.Empty() {
		fmt.Fprintf(out, "Nothing of capi-monolith dev left in the cluster of %s.\n", kubeconfig)
	} else {
		fmt.Fprintf(out, "Removed from the cluster of %s: %s\n", kubeconfig, left)
	}
	return err
}

// setUpLogging sends the controllers' logs (and client-go's) to
// <state>/logs/capi-monolith.log, so that the terminal shows progress only.
func setUpLogging(state string, verbosity int) (path string, closeFn func(), err error) {
	dir := filepath.Join(state, "logs")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", nil, fmt.Errorf("failed to create the log folder: %w", err)
	}
	path = filepath.Join(dir, "capi-monolith.log")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return "", nil, fmt.Errorf("failed to open the log file: %w", err)
	}
	log := textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(f), textlogger.Verbosity(verbosity)))
	setLogger(log)
	return path, func() { _ = f.Close() }, nil
}

func setLogger(log logr.Logger) {
	ctrl.SetLogger(log)
	klog.SetLogger(log)
}

func clusterAPIVersion() string {
	// Start located it already; this cannot fail here.
	if m, err := capimoduleLocate(); err == nil {
		return m
	}
	return "(unknown)"
}

func nextSteps(env *Environment) string {
	kc := env.KubeconfigPath
	var b strings.Builder
	fmt.Fprintf(&b, "Next, in another terminal:\n\n")
	fmt.Fprintf(&b, "  export KUBECONFIG=%s\n", kc)
	if env.Clusterctl != "" {
		// `go install` of clusterctl fails (the module's replace
		// directives): the one make built from the pinned module.
		fmt.Fprintf(&b, "  export PATH=%s:$PATH   # clusterctl %s\n", filepath.Dir(env.Clusterctl), clusterAPIVersion())
	} else {
		fmt.Fprintf(&b, "  make clusterctl   # then put its folder on PATH: clusterctl %s from the pinned module\n", clusterAPIVersion())
	}
	fmt.Fprintf(&b, "  kubectl get clusters,machines -A\n")
	fmt.Fprintf(&b, "  clusterctl generate cluster dev --from kustomize/templates/cluster-template.yaml \\\n")
	fmt.Fprintf(&b, "      --kubernetes-version v1.36.3 --control-plane-machine-count 1 --worker-machine-count 1 | kubectl apply -f -\n\n")
	fmt.Fprintf(&b, "Webhooks and the runtime extension serve on https://%s; state in %s.\n", env.WebhookAddress, env.StateDir)
	fmt.Fprintf(&b, "Press Ctrl-C to stop everything.\n")
	return b.String()
}
