package apiserver

import (
	"slices"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// resourceSet is what one cluster serves: the built-in resources (the
// resources table, CustomResourceDefinitions included) and the
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

// crdResource is the CustomResourceDefinitions resource, a built-in one
// (kube-apiserver's table lists it); the CRD hooks (crd_admit.go,
// crd_registry.go) tell it apart with isCRDResource.
var crdResource = func() *resource {
	r := lookup(crdGV, "customresourcedefinitions")
	if r == nil {
		panic("apiserver: the built-in resources have no customresourcedefinitions")
	}
	return r
}()

func isCRDResource(r *resource) bool {
	return r != nil && r.gv == crdGV && r.name == crdResource.name
}

func newResourceSet(custom []*resource, crds []*apiextensionsv1.CustomResourceDefinition) *resourceSet {
	s := &resourceSet{custom: custom, crds: crds}
	for _, r := range custom {
		if !servesGroupVersion(r.gv) && !slices.Contains(s.customGVs, r.gv) {
			s.customGVs = append(s.customGVs, r.gv)
		}
	}
	return s
}

func (s *resourceSet) lookup(gv schema.GroupVersion, name string) *resource {
	if r := lookup(gv, name); r != nil {
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
	return servesGroupVersion(gv) || slices.Contains(s.customGVs, gv)
}

// groupVersions in the order discovery lists them: the built-ins (core
// first), then the CRDs'.
func (s *resourceSet) groupVersions() []schema.GroupVersion {
	return append(slices.Clone(groupVersions), s.customGVs...)
}

// resourcesOf are the resources of one group version, in discovery order.
func (s *resourceSet) resourcesOf(gv schema.GroupVersion) []*resource {
	var out []*resource
	for _, r := range resources {
		if r.gv == gv {
			out = append(out, r)
		}
	}
	for _, r := range s.custom {
		if r.gv == gv && lookup(gv, r.name) == nil {
			out = append(out, r)
		}
	}
	return out
}

// resourceList is the discovery document of one group version.
func (s *resourceSet) resourceList(gv schema.GroupVersion) *metav1.APIResourceList {
	return resourceList(gv, s.resourcesOf(gv))
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
