// Package ipam is the ipam module of capi-monolith: the in-cluster IPAM provider: IP pool kinds that fulfil Cluster API IPAddressClaims.
package ipam

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/capi-monolith/capi-monolith/modules"
)

// Name is the value of --enable-modules that turns this module on.
const Name = "ipam"

// Module is the ipam module.
type Module struct{}

var _ modules.Module = Module{}

// Name implements modules.Module.
func (Module) Name() string { return Name }

// AddToScheme implements modules.Module. The module has no API types yet.
func (Module) AddToScheme(*runtime.Scheme) error { return nil }

// SetupWithManager implements modules.Module. The module has no controllers
// yet: enabling it runs nothing.
func (Module) SetupWithManager(ctx context.Context, _ ctrl.Manager, _ modules.Options) error {
	ctrl.LoggerFrom(ctx).Info("Module has no controllers yet")
	return nil
}
