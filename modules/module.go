package modules

import (
	"context"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
)

// Module is one provider (or part of one) inside the binary.
type Module interface {
	// Name is the value that turns the module on in --enable-modules.
	Name() string

	// AddToScheme registers every API type the module reads or writes.
	// It runs for enabled modules only, before the manager is built.
	AddToScheme(scheme *runtime.Scheme) error

	// SetupWithManager registers the module's controllers, webhooks,
	// indexes and runnables on the shared manager.
	SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts Options) error
}

// FlagBinder is implemented by modules that have flags of their own.
// Flags are bound for every known module, enabled or not, so that one set of
// manifests can be reused with a different --enable-modules value.
type FlagBinder interface {
	BindFlags(fs *pflag.FlagSet)
}

// Options are the settings every module receives; they are the same for all
// modules except Concurrency.
type Options struct {
	// WatchFilterValue is the value of the cluster.x-k8s.io/watch-filter
	// label that objects must carry to be reconciled; empty means all.
	WatchFilterValue string

	// WatchNamespace is the only namespace watched; empty means all.
	// The shared cache is already restricted to it; modules use it for
	// anything they read outside the cache.
	WatchNamespace string

	// Concurrency is the number of objects each of the module's
	// controllers reconciles at once (--<module>-concurrency).
	Concurrency int

	// WebhooksEnabled is false when the webhook server is disabled
	// (--webhook-port=0); modules then register no webhooks and must stay
	// safe on unvalidated input.
	WebhooksEnabled bool
}
