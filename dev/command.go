package dev

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/capi-monolith/capi-monolith/dev/progress"
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
}

// Command returns `capi-monolith dev` for the modules of reg: it starts the
// environment, prints what to do next, and runs until ctx is cancelled
// (Ctrl-C) or a part of it fails, then stops everything.
func Command(reg *modules.Registry) func(ctx context.Context, args []string) error {
	return func(ctx context.Context, args []string) error {
		return command(ctx, reg, args, os.Stdout, os.Stderr)
	}
}

func command(ctx context.Context, reg *modules.Registry, args []string, stdout, stderr io.Writer) error {
	var opts CommandOptions
	fs := pflag.NewFlagSet("capi-monolith dev", pflag.ContinueOnError)
	fs.SetNormalizeFunc(cliflag.WordSepNormalizeFunc)
	fs.SetOutput(stderr)
	fs.StringVar(&opts.Kubeconfig, "kubeconfig", "",
		"Use the existing cluster of this kubeconfig instead of starting etcd and kube-apiserver.")
	fs.StringVar(&opts.KubeconfigOut, "kubeconfig-out", DefaultKubeconfigOut,
		"Where to write the admin kubeconfig of the dev cluster.")
	fs.StringVar(&opts.DataDir, "data-dir", "",
		"Keep etcd's data, certificates and logs in this folder, so that the next start resumes where this one stopped. Without it everything is temporary and removed on exit.")
	fs.BoolVar(&opts.Quiet, "quiet", false, "Print no progress, only errors.")
	fs.IntVarP(&opts.Verbosity, "v", "v", 0, "Log verbosity of capi-monolith's controllers (logs go to <data dir>/logs).")
	// The manager's and the modules' flags, into typed options for Start.
	// Dev's listener defaults apply unless a flag says otherwise.
	mgrOpts := DefaultManagerOptions(nil)
	manager.BindFlags(fs, &mgrOpts, reg.Names())
	mgrOpts.HealthAddr, mgrOpts.Diagnostics.DiagnosticsAddress, mgrOpts.Diagnostics.InsecureDiagnostics = "0", "0", true
	fs.Lookup("health-addr").DefValue = "0"
	fs.Lookup("diagnostics-address").DefValue = "0"
	fs.Lookup("insecure-diagnostics").DefValue = "true"
	bound := reg.BindFlags(fs)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: capi-monolith dev [flags]\n\nStarts a whole Cluster API management cluster: etcd, kube-apiserver, Cluster API core and capi-monolith's modules.\n\nFlags:\n%s", fs.FlagUsages())
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if opts.KubeconfigOut == "" {
		return errors.New("--kubeconfig-out must not be empty")
	}
	if err := mgrOpts.Validate(); err != nil {
		return err
	}
	mods, err := bound.Modules(mgrOpts.EnableModules)
	if err != nil {
		return err
	}
	kubeconfigOut, err := filepath.Abs(opts.KubeconfigOut)
	if err != nil {
		return fmt.Errorf("failed to resolve --kubeconfig-out: %w", err)
	}

	var out io.Writer = stderr
	if opts.Quiet {
		out = nil
	}
	display := progress.New(out)
	display.Printf("Starting a Cluster API management cluster (capi-monolith dev)\n")

	state, ephemeral := opts.DataDir, false
	if state == "" {
		if state, err = os.MkdirTemp("", "capi-monolith-dev-"); err != nil {
			return fmt.Errorf("failed to create a temporary state folder: %w", err)
		}
		ephemeral = true
		// Start removes it on Stop, and on failure once it began; this
		// covers the failures before that.
		defer os.RemoveAll(state)
	}
	logs, closeLogs, err := setUpLogging(state, opts.Verbosity)
	if err != nil {
		return err
	}
	defer closeLogs()
	display.Printf("  logs: %s\n", filepath.Dir(logs))

	env, err := Start(ctx, Options{
		Kubeconfig:    opts.Kubeconfig,
		DataDir:       state,
		Ephemeral:     ephemeral,
		KubeconfigOut: kubeconfigOut,
		Modules:       mods,
		Manager:       &mgrOpts,
		Progress:      display,
	})
	if err != nil {
		return err
	}
	display.Printf("Ready in %s: Cluster API %s with modules %s.\n\n", display.Elapsed().Round(100*time.Millisecond), clusterAPIVersion(), strings.Join(env.Modules, ","))
	display.Printf("%s", nextSteps(env))
	// The kubeconfig path is what scripts wait for: always on stdout.
	fmt.Fprintf(stdout, "kubeconfig: %s\n", env.KubeconfigPath)

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
	fmt.Fprintf(&b, "  kubectl get clusters,machines -A\n")
	fmt.Fprintf(&b, "  clusterctl generate cluster dev --from kustomize/templates/cluster-template.yaml \\\n")
	fmt.Fprintf(&b, "      --kubernetes-version v1.36.3 --control-plane-machine-count 1 --worker-machine-count 1 | kubectl apply -f -\n\n")
	fmt.Fprintf(&b, "Webhooks and the runtime extension serve on https://%s; state in %s.\n", env.WebhookAddress, env.StateDir)
	fmt.Fprintf(&b, "Press Ctrl-C to stop everything.\n")
	return b.String()
}
