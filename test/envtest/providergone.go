package envtest

import (
	"context"
	"errors"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ProviderLabel is the label clusterctl puts on every object of a provider.
const ProviderLabel = "cluster.x-k8s.io/provider"

// ProviderKinds returns every group/version/kind the CRDs of a clusterctl
// provider (those labelled ProviderLabel=provider) define.
func ProviderKinds(ctx context.Context, c client.Reader, provider string) ([]schema.GroupVersionKind, error) {
	crds := &apiextensionsv1.CustomResourceDefinitionList{}
	if err := c.List(ctx, crds, client.MatchingLabels{ProviderLabel: provider}); err != nil {
		return nil, fmt.Errorf("failed to list the CRDs of %s: %w", provider, err)
	}
	var kinds []schema.GroupVersionKind
	for _, crd := range crds.Items {
		for _, v := range crd.Spec.Versions {
			kinds = append(kinds, schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind})
		}
	}
	return kinds, nil
}

// ProviderGone returns nil once no CRD of provider is left and discovery
// serves none of kinds (from ProviderKinds, before the provider was
// deleted), and otherwise an error saying what is left.
//
// `clusterctl delete` lists every kind discovery serves, except the kinds of
// the CRDs it finds: a kind whose CRD is already gone but which discovery
// still serves for a moment is listed, and fails the call ("no matches for
// kind"). A script that deletes providers one by one must wait for this
// between its calls, as the tests do.
func ProviderGone(ctx context.Context, cfg *rest.Config, c client.Reader, provider string, kinds []schema.GroupVersionKind) error {
	left, err := ProviderKinds(ctx, c, provider)
	if err != nil {
		return err
	}
	if len(left) > 0 {
		return fmt.Errorf("the CRDs of %s still define %v", provider, left)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return fmt.Errorf("failed to create a discovery client: %w", err)
	}
	_, lists, err := dc.ServerGroupsAndResources()
	// A group version that fails discovery is not served.
	var failed *discovery.ErrGroupDiscoveryFailed
	if err != nil && !errors.As(err, &failed) {
		return fmt.Errorf("failed to discover the served kinds: %w", err)
	}
	gone := map[schema.GroupVersionKind]bool{}
	for _, k := range kinds {
		gone[k] = true
	}
	for _, list := range lists {
		gv, err := schema.ParseGroupVersion(list.GroupVersion)
		if err != nil {
			return fmt.Errorf("discovery served group version %q: %w", list.GroupVersion, err)
		}
		for _, r := range list.APIResources {
			if k := gv.WithKind(r.Kind); gone[k] {
				return fmt.Errorf("discovery still serves %s of %s", k, provider)
			}
		}
	}
	return nil
}
