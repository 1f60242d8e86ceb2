package envtest

import (
	"context"
	"fmt"
	"os"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
)

// Main is the body of a suite's TestMain: it sets the test logger, starts
// the environment with opts plus the given scheme additions (a module's
// AddToScheme), stores it in *into, runs the tests and stops it.
func Main(m *testing.M, into **Environment, opts Options, addToScheme ...func(*runtime.Scheme) error) {
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
