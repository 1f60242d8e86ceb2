// Package infra is the infra module of capi-monolith: the docker-like
// infrastructure provider, with MonolithCluster and MonolithMachine
// (Cluster API's InfraCluster and InfraMachine) provisioned by a docker or
// an inMemory backend.
package infra

import (
	"context"
	"fmt"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/infra/backend/backendset"
	"github.com/capi-monolith/capi-monolith/infra/reconcilers/cluster"
	"github.com/capi-monolith/capi-monolith/infra/reconcilers/machine"
	"github.com/capi-monolith/capi-monolith/infra/tasks"
	"github.com/capi-monolith/capi-monolith/infra/webhooks"
	"github.com/capi-monolith/capi-monolith/modules"
)

// Name is the value of --enable-modules that turns this module on.
const Name = "infra"

// Module is the infra module. Its zero value is ready to use; BindFlags
// exposes the docker backend's settings on the command line.
type Module struct {
	backends backendset.Options
}

var (
	_ modules.Module     = &Module{}
	_ modules.FlagBinder = &Module{}
)

// Name implements modules.Module.
func (*Module) Name() string { return Name }

// BindFlags implements modules.FlagBinder.
// The machinepool module binds the same flags: backendset shares them.
func (m *Module) BindFlags(fs *pflag.FlagSet) {
	m.backends.BindFlags(fs)
}

// AddToScheme implements modules.Module: our kinds, and Cluster API's IPAM
// types for the machines' address claims.
func (*Module) AddToScheme(scheme *runtime.Scheme) error {
	if err := ipamv1.AddToScheme(scheme); err != nil {
		return err
	}
	return v1alpha1.AddToScheme(scheme)
}

// SetupWithManager implements modules.Module.
func (m *Module) SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts modules.Options) error {
	backends := backendset.New(ctx, m.backends)
	bootstraps := tasks.New(context.Background())
	if err := mgr.Add(bootstraps); err != nil {
		return fmt.Errorf("failed to add the bootstrap task manager: %w", err)
	}
	if opts.WebhooksEnabled {
		if err := webhooks.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("failed to set up the infra webhooks: %w", err)
		}
	}
	options := controller.Options{MaxConcurrentReconciles: opts.Concurrency}
	if err := (&cluster.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Backends: backends, WatchFilterValue: opts.WatchFilterValue}).
		SetupWithManager(ctx, mgr, options); err != nil {
		return fmt.Errorf("failed to set up the MonolithCluster controller: %w", err)
	}
	if err := (&machine.Reconciler{Client: mgr.GetClient(), Backends: backends, Tasks: bootstraps, WatchFilterValue: opts.WatchFilterValue}).
		SetupWithManager(ctx, mgr, options); err != nil {
		return fmt.Errorf("failed to set up the MonolithMachine controller: %w", err)
	}
	return nil
}
