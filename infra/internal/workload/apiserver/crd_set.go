package apiserver

import (
	"slices"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// resourceSet is what one cluster serves: the built-in resources (the
// resources table and the CustomResourceDefinitions resource) and the
// resources of that cluster's established CustomResourceDefinitions. A set
// is immutable once made; a cluster's CRD registry swaps in a new one when
// its CRDs change.
type resourceSet struct {
	// custom are the CRD resources, one per served version, ordered by
	// group, then by version priority (kube-aware: v2 > v1 > v1beta1),
	// then by name.
	custom []*resource
	// customGVs are the group versions of custom not served by a built-in,
	// in the same order.
	customGVs []schema.GroupVersion
	// crds are the established CRDs custom comes from.
	crds []*apiextensionsv1.CustomResourceDefinition

	// openAPIV3 are the v3 documents with the CRDs' (crd_openapi.go),
	// made from openAPIV3Base on first use.
	openAPIMu     sync.Mutex
	openAPIV3     *openAPIV3Docs
	openAPIV3Base *openAPIV3Docs
	openAPIV2     *openAPIDoc
	openAPIV2Base *openAPIDoc
}

// builtinSet serves no CRD resources: the set of every cluster without CRDs.
var builtinSet = &resourceSet{}

// crdGV is the group version of CustomResourceDefinitions.
var crdGV = schema.GroupVersion{Group: "apiextensions.k8s.io", Version: "v1"}

// crdResource is the CustomResourceDefinitions resource; it is served
// beside the resources table so that a built-in table that lists it too
// is not served twice (isCRDResource tells it apart by name).
var crdResource = &resource{
	gv: crdGV, name: "customresourcedefinitions", singular: "customresourcedefinition", kind: "CustomResourceDefinition",
	shortNames: []string{"crd", "crds"}, categories: []string{"api-extensions"}, status: true,
}

func isCRDResource(r *resource) bool {
	return r != nil && r.gv == crdGV && r.name == crdResource.name
}

// builtinLookup is a built-in resource, the CRD resource included.
func builtinLookup(gv schema.GroupVersion, name string) *resource {
	if r := lookup(gv, name); r != nil {
		return r
	}
	if gv == crdGV && name == crdResource.name {
		return crdResource
	}
	return nil
}

func builtinServes(gv schema.GroupVersion) bool {
	return servesGroupVersion(gv) || gv == crdGV
}

func newResourceSet(custom []*resource, crds []*apiextensionsv1.CustomResourceDefinition) *resourceSet {
	s := &resourceSet{custom: custom, crds: crds}
	for _, r := range custom {
		if !builtinServes(r.gv) && !slices.Contains(s.customGVs, r.gv) {
			s.customGVs = append(s.customGVs, r.gv)
		}
	}
	return s
}

func (s *resourceSet) lookup(gv schema.GroupVersion, name string) *resource {
	if r := builtinLookup(gv, name); r != nil {
		return r
	}
	for _, r := range s.custom {
		if r.gv == gv && r.name == name {
			return r
		}
	}
	return nil
}

func (s *resourceSet) servesGroupVersion(gv schema.GroupVersion) bool {
	return builtinServes(gv) || slices.Contains(s.customGVs, gv)
}

// groupVersions in the order discovery lists them: the built-ins (core
// first), then the CRDs'.
func (s *resourceSet) groupVersions() []schema.GroupVersion {
	out := slices.Clone(groupVersions)
	if !servesGroupVersion(crdGV) {
		out = append(out, crdGV)
	}
	return append(out, s.customGVs...)
}

// resourcesOf are the resources of one group version, in discovery order.
func (s *resourceSet) resourcesOf(gv schema.GroupVersion) []*resource {
	var out []*resource
	for _, r := range resources {
		if r.gv == gv {
			out = append(out, r)
		}
	}
	if gv == crdGV && lookup(crdGV, crdResource.name) == nil {
		out = append(out, crdResource)
	}
	for _, r := range s.custom {
		if r.gv == gv && builtinLookup(gv, r.name) == nil {
			out = append(out, r)
		}
	}
	return out
}

// resourceList is the discovery document of one group version.
func (s *resourceSet) resourceList(gv schema.GroupVersion) *metav1.APIResourceList {
	list := resourceList(gv)
	for _, r := range s.resourcesOf(gv) {
		if lookup(r.gv, r.name) == r {
			continue // resourceList has it
		}
		list.APIResources = append(list.APIResources, metav1.APIResource{
			Name: r.name, SingularName: r.singular, Namespaced: r.namespaced, Kind: r.kind,
			Verbs: allVerbs, ShortNames: r.shortNames, Categories: r.categories,
		})
		if r.status {
			list.APIResources = append(list.APIResources, metav1.APIResource{
				Name: r.name + "/status", Namespaced: r.namespaced, Kind: r.kind,
				Verbs: metav1.Verbs{"get", "patch", "update"},
			})
		}
		if r.custom != nil && r.custom.scale != nil {
			list.APIResources = append(list.APIResources, metav1.APIResource{
				Name: r.name + "/scale", Namespaced: r.namespaced, Group: "autoscaling", Version: "v1", Kind: "Scale",
				Verbs: metav1.Verbs{"get", "patch", "update"},
			})
		}
	}
	return list
}

func (s *resourceSet) apiGroup(group string) *metav1.APIGroup {
	if group == "" {
		return nil
	}
	var g *metav1.APIGroup
	for _, gv := range s.groupVersions() {
		if gv.Group != group {
			continue
		}
		v := metav1.GroupVersionForDiscovery{GroupVersion: gv.String(), Version: gv.Version}
		if g == nil {
			g = &metav1.APIGroup{TypeMeta: metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}, Name: group, PreferredVersion: v}
		}
		g.Versions = append(g.Versions, v)
	}
	return g
}

func (s *resourceSet) apiGroupList() *metav1.APIGroupList {
	list := &metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}}
	seen := map[string]bool{}
	for _, gv := range s.groupVersions() {
		if gv.Group == "" || seen[gv.Group] {
			continue
		}
		seen[gv.Group] = true
		list.Groups = append(list.Groups, *s.apiGroup(gv.Group))
	}
	return list
}
