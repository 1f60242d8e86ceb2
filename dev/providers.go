package dev

import (
	"slices"

	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"

	"github.com/capi-monolith/capi-monolith/dev/capimodule"
	"github.com/capi-monolith/capi-monolith/dev/inventory"
	"github.com/capi-monolith/capi-monolith/kustomize/bundle"
	"github.com/capi-monolith/capi-monolith/modules"
)

// DefaultProviderVersion is the version dev records for capi-monolith's
// providers in clusterctl's inventory: the newest release series (see
// bundle.ReleasedSeries). A clusterctl repository of this version (from
// `capi-monolith bundle --version`) serves their templates to
// `clusterctl generate cluster`.
const DefaultProviderVersion = "v0.1.0"

// clusterAPIProvider is how clusterctl init records one of Cluster API's
// managers: its provider name and type, and the namespace of its components.
func clusterAPIProvider(c capimodule.Component, version string) inventory.Provider {
	switch c {
	case capimodule.KubeadmBootstrap:
		return inventory.Provider{Name: "kubeadm", Type: clusterctlv1.BootstrapProviderType, Version: version, Namespace: "capi-kubeadm-bootstrap-system"}
	case capimodule.KubeadmControlPlane:
		return inventory.Provider{Name: "kubeadm", Type: clusterctlv1.ControlPlaneProviderType, Version: version, Namespace: "capi-kubeadm-control-plane-system"}
	default:
		return inventory.Provider{Name: "cluster-api", Type: clusterctlv1.CoreProviderType, Version: version, Namespace: "capi-system"}
	}
}

// ownProvider is the clusterctl provider type that packages module (see
// bundle.Providers); false for a module no provider packages.
func ownProvider(module, version string) (inventory.Provider, bool) {
	for _, p := range bundle.Providers {
		if slices.Contains(p.Modules, module) {
			return inventory.Provider{Name: bundle.ProviderName, Type: clusterctlv1.ProviderType(p.Type), Version: version, Namespace: p.Namespace}, true
		}
	}
	return inventory.Provider{}, false
}

// inventoryOf lists what dev runs as clusterctl would have recorded it:
// Cluster API's managers, and the provider types of the enabled modules.
func inventoryOf(components []capimodule.Component, capiVersion string, enabled []modules.Module, ownVersion string) []inventory.Provider {
	var out []inventory.Provider
	for _, c := range components {
		out = append(out, clusterAPIProvider(c, capiVersion))
	}
	for _, m := range enabled {
		p, ok := ownProvider(m.Name(), ownVersion)
		if ok && !slices.ContainsFunc(out, func(q inventory.Provider) bool { return q.Label() == p.Label() }) {
			out = append(out, p)
		}
	}
	return out
}
