package modules

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
)

// Module is one provider (or part of one) inside the binary. A module value
// carries its own typed options: it is built by its package's constructor
// (for example infra.New(infra.Options)), from flags by the binary's
// registry, or directly by tests, dev and the benchmarks.
type Module interface {
	// Name is the value that turns the module on in --enable-modules.
	Name() string

	// AddToScheme registers every API type the module reads or writes.
	// It runs for enabled modules only, before the manager is built.
	AddToScheme(scheme *runtime.Scheme) error

	// SetupWithManager registers the module's controllers, webhooks,
	// indexes and runnables on the shared manager. Modules are set up in
	// the order given, so a module that uses another (handed to its
	// constructor, as machinepool is infra's machine controller) comes
	// after it.
	SetupWithManager(ctx context.Context, shared Shared) error
}

// Options are the settings every module receives; they are the same for all
// modules except Concurrency.
type Options struct {
	// WatchFilterValue is the value of the cluster.x-k8s.io/watch-filter
	// label that objects must carry to be reconciled; empty means all.
	WatchFilterValue string

	// WatchNamespace is the only namespace watched; empty means all.
	// The shared cache is already restricted to it; modules use it for
	// anything they read outside the cache, and to answer requests (such as
	// runtime hooks) about objects the cache does not hold.
	WatchNamespace string

	// Concurrency is the number of objects each of the module's
	// controllers reconciles at once (--<module>-concurrency).
	Concurrency int

	// WebhooksEnabled is false when the webhook server is disabled
	// (--webhook-port=0); modules then register no webhooks and must stay
	// safe on unvalidated input.
	WebhooksEnabled bool
}

// Shared is what the manager hands to each module it sets up.
type Shared struct {
	// Manager is the one controller-runtime manager of the process.
	Manager ctrl.Manager
	// Options are the settings common to every module.
	Options Options
}

// StateKeeper is a module that can keep state of its own across restarts
// of the process, in a folder it is given: dev gives each one a folder of
// its --data-dir (and none without it, so that nothing is kept).
type StateKeeper interface {
	Module
	// KeepStateIn keeps the module's state in dir, unless its options
	// name a folder already. Called before SetupWithManager.
	KeepStateIn(dir string)
}
