// Package builtin lists the modules compiled into capi-monolith. It is the
// only package that imports every module, so that main.go knows none of them
// and modules never import each other.
package builtin

import (
	"github.com/capi-monolith/capi-monolith/infra"
	"github.com/capi-monolith/capi-monolith/ipam"
	"github.com/capi-monolith/capi-monolith/machinepool"
	"github.com/capi-monolith/capi-monolith/modules"
	"github.com/capi-monolith/capi-monolith/runtimeext"
)

// Registry returns every built-in module, in set-up order.
func Registry() *modules.Registry {
	reg, err := modules.NewRegistry(
		&infra.Module{},
		&machinepool.Module{},
		ipam.Module{},
		&runtimeext.Module{},
	)
	if err != nil {
		// The list above is fixed at compile time; a clash is a programming error.
		panic(err)
	}
	return reg
}
