package dev

import (
	"context"

	"github.com/capi-monolith/capi-monolith/dev/inventory"
)

// installCRDsAndInventory is step 2: the CRDs of Cluster API core and
// kubeadm and ours, and every provider recorded in clusterctl's inventory.
func (e *Environment) installCRDsAndInventory(ctx context.Context, p *plan) error {
	done := p.display.Step("CRDs (Cluster API " + p.capi.Version + " core and kubeadm, and capi-monolith's)")
	err := installCRDs(ctx, e.Config, p.capi)
	if err == nil {
		err = inventory.Write(ctx, e.Config, e.Client, inventoryOf(components(p.managers), p.capi.Version, p.enabled, DefaultProviderVersion))
	}
	done(err)
	return err
}
