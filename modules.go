package main

import (
	"github.com/spf13/pflag"

	"github.com/capi-monolith/capi-monolith/infra"
	"github.com/capi-monolith/capi-monolith/ipam"
	"github.com/capi-monolith/capi-monolith/machinepool"
	"github.com/capi-monolith/capi-monolith/manager"
	"github.com/capi-monolith/capi-monolith/modules"
	"github.com/capi-monolith/capi-monolith/runtimeext"
)

// builtinModules are the modules compiled into capi-monolith, in build and
// set-up order: each entry names the modules it requires, and binds its
// typed options to the binary's flags. This is the only place that knows
// every module; main.go and manager/ know none of them.
func builtinModules() []modules.Entry {
	// The registry builds the enabled modules in its order and refuses
	// machinepool without infra, so machinepool's builder always finds the
	// infra module built for the same run here.
	var infraModule *infra.Module
	return []modules.Entry{
		{
			Name: infra.Name,
			BindFlags: func(fs *pflag.FlagSet) func() modules.Module {
				opts := infra.DefaultOptions()
				opts.BindFlags(fs)
				return func() modules.Module {
					infraModule = infra.New(opts)
					return infraModule
				}
			},
		},
		{
			Name: machinepool.Name,
			// Its instances are MonolithMachines of infra's one machine
			// controller, handed to it here: --enable-modules=machinepool
			// alone is refused.
			Requires: []string{infra.Name},
			BindFlags: func(fs *pflag.FlagSet) func() modules.Module {
				opts := machinepool.DefaultOptions()
				opts.BindFlags(fs)
				return func() modules.Module { return machinepool.New(infraModule.Machines(), opts) }
			},
		},
		{
			Name: ipam.Name,
			BindFlags: func(fs *pflag.FlagSet) func() modules.Module {
				opts := ipam.DefaultOptions()
				opts.BindFlags(fs)
				return func() modules.Module { return ipam.New(opts) }
			},
		},
		{
			Name: runtimeext.Name,
			BindFlags: func(fs *pflag.FlagSet) func() modules.Module {
				opts := runtimeext.DefaultOptions()
				opts.BindFlags(fs)
				return func() modules.Module { return runtimeext.New(opts) }
			},
		},
	}
}

// registry returns the registry of builtinModules.
func registry() *modules.Registry {
	reg, err := modules.NewRegistry(builtinModules()...)
	if err != nil {
		// The list above is fixed at compile time; a clash is a programming error.
		panic(err)
	}
	return reg
}

// bindFlags binds the manager's and every module's flags to fs, and returns
// what builds the enabled modules once fs is parsed.
func bindFlags(fs *pflag.FlagSet, opts *manager.Options) (*modules.Registry, *modules.Bound) {
	reg := registry()
	manager.BindFlags(fs, opts, reg.Names())
	return reg, reg.BindFlags(fs)
}
