// Package managertest starts the binary's own manager (manager.New with
// typed options and modules) inside a test, as `capi-monolith` would start
// it, with every listener off so that many can run one after another in a
// process.
package managertest

import (
	"context"
	"os"
	"runtime/pprof"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"

	"github.com/capi-monolith/capi-monolith/infra"
	"github.com/capi-monolith/capi-monolith/ipam"
	"github.com/capi-monolith/capi-monolith/machinepool"
	"github.com/capi-monolith/capi-monolith/manager"
	"github.com/capi-monolith/capi-monolith/modules"
	"github.com/capi-monolith/capi-monolith/runtimeext"
)

// Options returns the manager's defaults for the named modules with every
// listener off: no webhook server, health or diagnostics endpoint. Tests
// change the fields they need.
func Options(moduleNames ...string) manager.Options {
	opts := manager.DefaultOptions(moduleNames...)
	opts.WebhookPort = 0
	opts.HealthAddr = "0"
	opts.Diagnostics.DiagnosticsAddress = "0"
	opts.Diagnostics.InsecureDiagnostics = true
	opts.SkipControllerNameValidation = true
	return opts
}

// Infra, IPAM and RuntimeExt return the modules with their default options.
func Infra() *infra.Module       { return infra.New(infra.DefaultOptions()) }
func IPAM() modules.Module       { return ipam.New(ipam.DefaultOptions()) }
func RuntimeExt() modules.Module { return runtimeext.New(runtimeext.DefaultOptions()) }

// Machinepool returns the machinepool module with its default options,
// beside infraModule, whose MonolithMachine controller reconciles its
// instances (infraModule is set up before it on the same manager).
func Machinepool(infraModule *infra.Module) modules.Module {
	return machinepool.New(infraModule.Machines(), machinepool.DefaultOptions())
}

// Start builds the manager of mods with opts against cfg, starts it, and
// returns a function that stops it and fails the test if it stopped with an
// error. It is also stopped when the test ends.
func Start(t *testing.T, cfg *rest.Config, opts manager.Options, mods ...modules.Module) (stop func()) {
	t.Helper()
	g := NewWithT(t)
	mgr, err := manager.New(context.Background(), cfg, opts, mods...)
	g.Expect(err).NotTo(HaveOccurred())

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		err := <-done
		if err != nil {
			// Which runnable did not stop: the goroutines say.
			_ = pprof.Lookup("goroutine").WriteTo(os.Stderr, 1)
		}
		g.Expect(err).To(Succeed())
	}
	t.Cleanup(stop)
	return stop
}

// All returns the four modules with their default options.
func All() []modules.Module {
	infraModule := Infra()
	return []modules.Module{infraModule, Machinepool(infraModule), IPAM(), RuntimeExt()}
}

// BindFlags binds the manager's flags and every module's to fs, as the
// binary does, for tests that check command lines written elsewhere (the
// manifests' manager args). The binary's own list is main's registry;
// main_test checks that it names the same modules.
func BindFlags(fs *pflag.FlagSet, opts *manager.Options) {
	manager.BindFlags(fs, opts, []string{infra.Name, machinepool.Name, ipam.Name, runtimeext.Name})
	infraOpts, poolOpts, ipamOpts, extOpts := infra.DefaultOptions(), machinepool.DefaultOptions(), ipam.DefaultOptions(), runtimeext.DefaultOptions()
	infraOpts.BindFlags(fs)
	poolOpts.BindFlags(fs)
	ipamOpts.BindFlags(fs)
	extOpts.BindFlags(fs)
}
