package dev

import (
	"context"
	"slices"

	"github.com/capi-monolith/capi-monolith/dev/kubeconfig"
	"github.com/capi-monolith/capi-monolith/runtimeext"
)

// startExtension is step 5, the runtime extension, once both sides serve:
// core discovers it as soon as the ExtensionConfig exists.
func (e *Environment) startExtension(ctx context.Context, p *plan) error {
	if !slices.Contains(e.Modules, runtimeext.Name) {
		return nil
	}
	done := p.display.Step("ExtensionConfig " + p.opts.ExtensionConfigName)
	err := e.registerExtension(ctx)
	done(err)
	return err
}

// writeKubeconfigOut writes the admin kubeconfig where --kubeconfig-out
// says, when it says.
func (e *Environment) writeKubeconfigOut() error {
	if e.opts.KubeconfigOut == "" {
		return nil
	}
	if err := kubeconfig.WriteFromREST(e.Config, e.opts.KubeconfigOut); err != nil {
		return err
	}
	e.KubeconfigPath = e.opts.KubeconfigOut
	return nil
}
