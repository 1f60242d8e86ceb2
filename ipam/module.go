// Package ipam is the ipam module of capi-monolith: an in-cluster IPAM
// provider whose pool kinds (MonolithIPPool, GlobalMonolithIPPool) fulfil
// Cluster API IPAddressClaims with IPAddresses, never handing out an
// address twice.
package ipam

import (
	"context"
	"fmt"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/capi-monolith/capi-monolith/ipam/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/ipam/internal/index"
	"github.com/capi-monolith/capi-monolith/ipam/internal/ledger"
	"github.com/capi-monolith/capi-monolith/ipam/internal/reconcilers/claim"
	"github.com/capi-monolith/capi-monolith/ipam/internal/reconcilers/pool"
	"github.com/capi-monolith/capi-monolith/ipam/internal/webhooks"
	"github.com/capi-monolith/capi-monolith/modules"
)

// Name is the value of --enable-modules that turns this module on.
const Name = "ipam"

// Options are the ipam module's settings; it has none of its own today.
type Options struct{}

// DefaultOptions returns the options the flags default to.
func DefaultOptions() Options { return Options{} }

// BindFlags binds o to fs.
func (o *Options) BindFlags(*pflag.FlagSet) {}

// Module is the ipam module.
type Module struct {
	opts Options
}

var _ modules.Module = Module{}

// New returns the ipam module with opts.
func New(opts Options) Module { return Module{opts: opts} }

// Name implements modules.Module.
func (Module) Name() string { return Name }

// AddToScheme implements modules.Module: Cluster API's IPAM types and our
// pool kinds.
func (Module) AddToScheme(scheme *runtime.Scheme) error {
	if err := ipamv1.AddToScheme(scheme); err != nil {
		return err
	}
	return v1alpha1.AddToScheme(scheme)
}

// SetupWithManager implements modules.Module.
func (Module) SetupWithManager(ctx context.Context, shared modules.Shared) error {
	mgr, opts := shared.Manager, shared.Options
	if err := index.Setup(ctx, mgr); err != nil {
		return err
	}
	// The ledger reads the shared cache: its indexes answer "the allocation
	// records of this pool" without a list call to the apiserver.
	l := ledger.New(mgr.GetCache())
	if err := l.Watch(ctx, mgr.GetCache()); err != nil {
		return fmt.Errorf("failed to watch allocation records for the ledger: %w", err)
	}
	options := controller.Options{MaxConcurrentReconciles: opts.Concurrency}
	if err := (&claim.Reconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Ledger: l, WatchFilterValue: opts.WatchFilterValue,
		Recorder: mgr.GetEventRecorder("ipam-monolith"),
	}).
		SetupWithManager(ctx, mgr, options); err != nil {
		return fmt.Errorf("failed to set up the IPAddressClaim controller: %w", err)
	}
	if err := (&pool.Reconciler[*v1alpha1.MonolithIPPool]{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Ledger: l, WatchFilterValue: opts.WatchFilterValue,
		NewObject: func() *v1alpha1.MonolithIPPool { return &v1alpha1.MonolithIPPool{} }, Kind: v1alpha1.MonolithIPPoolKind,
	}).SetupWithManager(ctx, mgr, options); err != nil {
		return fmt.Errorf("failed to set up the MonolithIPPool controller: %w", err)
	}
	if opts.WebhooksEnabled {
		if err := webhooks.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("failed to set up the pool webhooks: %w", err)
		}
	}
	if err := (&pool.Reconciler[*v1alpha1.GlobalMonolithIPPool]{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Ledger: l, WatchFilterValue: opts.WatchFilterValue,
		NewObject: func() *v1alpha1.GlobalMonolithIPPool { return &v1alpha1.GlobalMonolithIPPool{} }, Kind: v1alpha1.GlobalMonolithIPPoolKind,
	}).SetupWithManager(ctx, mgr, options); err != nil {
		return fmt.Errorf("failed to set up the GlobalMonolithIPPool controller: %w", err)
	}
	return nil
}
