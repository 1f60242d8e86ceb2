// Command capi-monolith is one binary that is three Cluster API providers:
// infrastructure (with machine pools), IPAM and a Runtime SDK extension. The
// modules to run are picked with --enable-modules; all of them share one
// controller-runtime manager.
package main

import (
	"context"
	"errors"
	goflag "flag"
	"fmt"
	"os"

	"github.com/spf13/pflag"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/logs"
	logsv1 "k8s.io/component-base/logs/api/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/capi-monolith/capi-monolith/manager"
)

func main() {
	ctx := context.Background()
	// A subcommand that handles signals itself (dev: a second Ctrl-C must
	// still clean up) must not get controller-runtime's handler, which
	// exits at once on the second signal.
	if !handlesSignals(os.Args[1:]) {
		ctx = ctrl.SetupSignalHandler()
	}
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "Error: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	if handled, err := dispatch(ctx, args); handled {
		return err
	}
	fs := pflag.NewFlagSet("capi-monolith", pflag.ContinueOnError)
	fs.SetNormalizeFunc(cliflag.WordSepNormalizeFunc)
	var opts manager.Options
	_, bound := bindFlags(fs, &opts)
	logOptions := logs.NewOptions()
	logsv1.AddFlags(logOptions, fs)
	// controller-runtime registers --kubeconfig on the Go flag set.
	fs.AddGoFlagSet(goflag.CommandLine)

	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	// Reject bad flags before anything connects anywhere.
	if err := opts.Validate(); err != nil {
		return err
	}
	mods, err := bound.Modules(opts.EnableModules)
	if err != nil {
		return err
	}
	if err := logsv1.ValidateAndApply(logOptions, nil); err != nil {
		return fmt.Errorf("invalid logging flags: %w", err)
	}
	ctrl.SetLogger(klog.Background())
	log := ctrl.Log.WithName("setup")

	restConfig, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("failed to load a kubeconfig: %w", err)
	}
	mgr, err := manager.New(ctrl.LoggerInto(ctx, log), restConfig, opts, mods...)
	if err != nil {
		return err
	}
	log.Info("Starting manager", "modules", opts.EnableModules)
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("manager stopped: %w", err)
	}
	return nil
}
