// Package managertest starts the binary's own manager (manager.New with the
// built-in modules) inside a test, as `capi-monolith` would start it, with
// every listener off so that many can run one after another in a process.
package managertest

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"

	"github.com/capi-monolith/capi-monolith/manager"
	"github.com/capi-monolith/capi-monolith/modules/builtin"
)

// Quiet are the flags every test manager gets before the test's own: no
// webhook server, health or diagnostics listener.
var Quiet = []string{"--webhook-port=0", "--health-addr=0", "--diagnostics-address=0", "--insecure-diagnostics"}

// Start builds the manager from command-line args (after Quiet) against
// cfg, starts it, and returns a function that stops it and fails the test if
// it stopped with an error. It is also stopped when the test ends.
func Start(t *testing.T, cfg *rest.Config, args ...string) (stop func()) {
	t.Helper()
	g := NewWithT(t)
	reg := builtin.Registry()
	var opts manager.Options
	fs := pflag.NewFlagSet(t.Name(), pflag.ContinueOnError)
	manager.BindFlags(fs, &opts, reg)
	g.Expect(fs.Parse(append(append([]string{}, Quiet...), args...))).To(Succeed())
	opts.SkipControllerNameValidation = true
	mgr, err := manager.New(context.Background(), cfg, reg, opts)
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
		g.Expect(<-done).To(Succeed())
	}
	t.Cleanup(stop)
	return stop
}
