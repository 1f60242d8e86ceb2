package envtest

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
)

// Runner is what Main runs: a *testing.M, or a wrapper around one.
type Runner interface{ Run() int }

// Main is the body of a suite's TestMain: it sets the test logger, starts
// the environment with opts plus the given scheme additions (a module's
// AddToScheme), stores it in *into, runs the tests and stops it.
func Main(m Runner, into **Environment, opts Options, addToScheme ...func(*runtime.Scheme) error) {
	ctrl.SetLogger(TestLogger())
	exit := func(err error) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if len(addToScheme) > 0 {
		if opts.Scheme == nil {
			scheme, err := NewScheme()
			if err != nil {
				exit(err)
			}
			opts.Scheme = scheme
		}
		for _, add := range addToScheme {
			if err := add(opts.Scheme); err != nil {
				exit(fmt.Errorf("failed to build the test scheme: %w", err))
			}
		}
	}
	env, err := Start(context.Background(), opts)
	if err != nil {
		exit(err)
	}
	*into = env
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// WebhookMain is Main for a webhook suite: once the environment runs, it
// also starts a manager serving the webhooks setup registers where the
// apiserver calls the configurations of opts.WebhookInstallOptions, stores
// that manager in *mgr (its cached client is what the webhooks read), and
// stops both after the tests.
func WebhookMain(m *testing.M, into **Environment, mgr *ctrl.Manager, setup func(ctrl.Manager) error, opts Options, addToScheme ...func(*runtime.Scheme) error) {
	// `go test -fuzz` (make fuzz) runs only a fuzz target, which calls the
	// validators directly: no apiserver, in the coordinator or in any of
	// its workers.
	flag.Parse()
	if f := flag.Lookup("test.fuzz"); f != nil && f.Value.String() != "" {
		os.Exit(m.Run())
	}
	Main(&webhookM{m: m, env: into, mgr: mgr, setup: setup}, into, opts, addToScheme...)
}

// webhookM runs the webhook manager around the tests of m.
type webhookM struct {
	m     *testing.M
	env   **Environment
	mgr   *ctrl.Manager
	setup func(ctrl.Manager) error
}

func (w *webhookM) Run() int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	mgr, stop, err := (*w.env).StartWebhookManager(ctx, w.setup)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	*w.mgr = mgr
	code := w.m.Run()
	if err := stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		if code == 0 {
			code = 1
		}
	}
	return code
}
