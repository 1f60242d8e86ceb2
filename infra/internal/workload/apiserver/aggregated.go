package apiserver

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// aggregatedContentType is the media type of aggregated discovery v2, which
// client-go and kubectl ask for first: one document for /api and one for
// /apis instead of one per group version.
const aggregatedContentType = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"

// wantsAggregated says the Accept header asks for aggregated discovery v2.
func wantsAggregated(r *http.Request) bool {
	for _, accept := range strings.Split(r.Header.Get("Accept"), ",") {
		params := map[string]string{}
		for _, p := range strings.Split(accept, ";")[1:] {
			k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
			params[k] = v
		}
		if params["g"] == "apidiscovery.k8s.io" && params["v"] == "v2" && params["as"] == "APIGroupDiscoveryList" {
			return true
		}
	}
	return false
}

// aggregatedDiscovery is the document of the core group (legacy) or of the
// named groups a cluster serves, each group with its versions in order of
// preference.
func aggregatedDiscovery(set *resourceSet, legacy bool) *apidiscoveryv2.APIGroupDiscoveryList {
	list := &apidiscoveryv2.APIGroupDiscoveryList{
		TypeMeta: metav1.TypeMeta{Kind: "APIGroupDiscoveryList", APIVersion: "apidiscovery.k8s.io/v2"},
	}
	for _, gv := range set.groupVersions() {
		if (gv.Group == "") != legacy {
			continue
		}
		version := apidiscoveryv2.APIVersionDiscovery{Version: gv.Version, Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent}
		for _, r := range set.resourcesOf(gv) {
			scope := apidiscoveryv2.ScopeCluster
			if r.namespaced {
				scope = apidiscoveryv2.ScopeNamespace
			}
			d := apidiscoveryv2.APIResourceDiscovery{
				Resource: r.name, SingularResource: r.singular, Scope: scope, Verbs: r.allowedVerbs(),
				ShortNames: r.shortNames, Categories: r.categories,
				ResponseKind: &metav1.GroupVersionKind{Group: gv.Group, Version: gv.Version, Kind: r.kind},
			}
			if r.builtin {
				d.ResponseKind = &metav1.GroupVersionKind{Kind: r.kind}
			}
			for _, s := range r.subresourceList() {
				d.Subresources = append(d.Subresources, apidiscoveryv2.APISubresourceDiscovery{
					Subresource:  s.name,
					ResponseKind: &metav1.GroupVersionKind{Group: s.kind.Group, Version: s.kind.Version, Kind: s.kind.Kind},
					Verbs:        s.verbs,
				})
			}
			version.Resources = append(version.Resources, d)
		}
		// A group's versions are listed together, the preferred first.
		if i := slices.IndexFunc(list.Items, func(g apidiscoveryv2.APIGroupDiscovery) bool { return g.Name == gv.Group }); i >= 0 {
			list.Items[i].Versions = append(list.Items[i].Versions, version)
			continue
		}
		list.Items = append(list.Items, apidiscoveryv2.APIGroupDiscovery{
			ObjectMeta: metav1.ObjectMeta{Name: gv.Group},
			Versions:   []apidiscoveryv2.APIVersionDiscovery{version},
		})
	}
	return list
}

func writeAggregated(w http.ResponseWriter, set *resourceSet, legacy bool) {
	body, err := json.Marshal(aggregatedDiscovery(set, legacy))
	if err != nil {
		writeError(w, apierrors.NewInternalError(fmt.Errorf("failed to encode the discovery document: %w", err)))
		return
	}
	w.Header().Set("Content-Type", aggregatedContentType)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}
