// Package machinepool is the machinepool module of capi-monolith: the
// InfraMachinePool of the infrastructure provider, MonolithMachinePool,
// with MachinePool Machines. Its instances are MonolithMachines provisioned
// through the infra module's backends (infra/backend), configured by the
// same --docker-* flags.
package machinepool

import (
	"context"
	"fmt"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	infrav1 "github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/infra/backend/backendset"
	"github.com/capi-monolith/capi-monolith/infra/tasks"
	"github.com/capi-monolith/capi-monolith/machinepool/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/machinepool/reconcilers/instance"
	"github.com/capi-monolith/capi-monolith/machinepool/reconcilers/pool"
	"github.com/capi-monolith/capi-monolith/machinepool/webhooks"
	"github.com/capi-monolith/capi-monolith/modules"
)

// Name is the value of --enable-modules that turns this module on.
const Name = "machinepool"

// Module is the machinepool module. Its zero value is ready to use;
// BindFlags shares the infra module's backend flags.
type Module struct {
	backends backendset.Options
}

var (
	_ modules.Module     = &Module{}
	_ modules.FlagBinder = &Module{}
)

// Name implements modules.Module.
func (*Module) Name() string { return Name }

// BindFlags implements modules.FlagBinder: the --docker-* flags, shared
// with the infra module.
func (m *Module) BindFlags(fs *pflag.FlagSet) {
	m.backends.BindFlags(fs)
}

// AddToScheme implements modules.Module: the pool kinds, the infra kinds
// (instances are MonolithMachines of MonolithClusters) and Cluster API's
// IPAM types for the instances' address claims.
func (*Module) AddToScheme(scheme *runtime.Scheme) error {
	for _, add := range []func(*runtime.Scheme) error{ipamv1.AddToScheme, infrav1.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			return err
		}
	}
	return nil
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
			return fmt.Errorf("failed to set up the machinepool webhooks: %w", err)
		}
	}
	options := controller.Options{MaxConcurrentReconciles: opts.Concurrency}
	if err := (&pool.Reconciler{Client: mgr.GetClient(), WatchFilterValue: opts.WatchFilterValue}).
		SetupWithManager(ctx, mgr, options); err != nil {
		return fmt.Errorf("failed to set up the MonolithMachinePool controller: %w", err)
	}
	if err := (&instance.Reconciler{Client: mgr.GetClient(), Backends: backends, Tasks: bootstraps, WatchFilterValue: opts.WatchFilterValue}).
		SetupWithManager(ctx, mgr, options); err != nil {
		return fmt.Errorf("failed to set up the MonolithMachinePool instance controller: %w", err)
	}
	return nil
}
