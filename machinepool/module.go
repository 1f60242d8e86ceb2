// Package machinepool is the machinepool module of capi-monolith: the
// InfraMachinePool of the infrastructure provider, MonolithMachinePool,
// with MachinePool Machines. It needs the infra module: its instances are
// MonolithMachines that infra's one MonolithMachine controller provisions
// (handed to New, see infra/machines), with this module's owner adapter
// answering for their MachinePool.
package machinepool

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	infrav1 "github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/infra/machines"
	"github.com/capi-monolith/capi-monolith/machinepool/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/machinepool/internal/instances"
	"github.com/capi-monolith/capi-monolith/machinepool/internal/reconcilers/pool"
	"github.com/capi-monolith/capi-monolith/machinepool/internal/webhooks"
	"github.com/capi-monolith/capi-monolith/modules"
)

// Name is the value of --enable-modules that turns this module on.
const Name = "machinepool"

// infraName is the module whose MonolithMachine controller reconciles this
// module's instances (infra.Name; infra's root package is not imported so
// that only the seam, infra/machines, ties the two modules).
const infraName = "infra"

// Options are the machinepool module's settings. It has none of its own
// today: its instances are configured by the infra module's options.
type Options struct{}

// DefaultOptions returns the options the flags default to.
func DefaultOptions() Options { return Options{} }

// BindFlags binds o to fs.
func (o *Options) BindFlags(*pflag.FlagSet) {}

// Module is the machinepool module.
type Module struct {
	opts     Options
	machines *machines.Controller
}

var _ modules.Module = &Module{}

// New returns the machinepool module with opts. Its instances are
// reconciled by machineController, the infra module's (infra.Module's
// Machines), which must be set up on the same manager before this module.
func New(machineController *machines.Controller, opts Options) *Module {
	return &Module{opts: opts, machines: machineController}
}

// Name implements modules.Module.
func (*Module) Name() string { return Name }

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

// SetupWithManager implements modules.Module: the MonolithMachinePool
// controller and webhooks, and the instances' owner adapter registered with
// infra's machine controller.
func (m *Module) SetupWithManager(ctx context.Context, shared modules.Shared) error {
	mgr, opts := shared.Manager, shared.Options
	if m.machines == nil {
		return fmt.Errorf("module %q requires module %q: New was given no MonolithMachine controller", Name, infraName)
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
	owner := instances.Owner{Client: mgr.GetClient()}
	if err := m.machines.RegisterOwner(mgr, owner, owner.Source(mgr)); err != nil {
		if errors.Is(err, machines.ErrNotSetUp) {
			return fmt.Errorf("module %q requires module %q, set up before it on the same manager: %w", Name, infraName, err)
		}
		return fmt.Errorf("failed to register the MachinePool owner with the MonolithMachine controller: %w", err)
	}
	return nil
}
