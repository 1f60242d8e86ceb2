package apiserver

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
)

// resource is one served resource and what discovery says of it.
type resource struct {
	gv         schema.GroupVersion
	name       string
	singular   string
	kind       string
	namespaced bool
	shortNames []string
	categories []string
	// verbs are the verbs discovery lists and the Handler serves; nil
	// means allVerbs.
	verbs []string
	// storageVersionHash is what kube-apiserver's discovery says of the
	// resource's storage version ("" for resources it does not store).
	storageVersionHash string
	// subresources are what discovery lists; nil means the ones the
	// status and eviction fields and a CRD's scale say.
	subresources []subresource
	// status says the resource has a status subresource: updates of the
	// main resource keep the stored status, updates of status keep the rest.
	status bool
	// eviction says the resource has the eviction subresource (pods).
	eviction bool
	// portForward says the resource has the portforward subresource
	// (pods), served when Options.PortForward is set.
	portForward bool
	// storeAs is the name the store keeps the resource's objects under
	// when it is not the resource's name: a group resource served in
	// more than one version keeps the objects of the versions after the
	// preferred one apart, unless convert.go converts between them.
	storeAs string
	// conversion is set for a resource served from another one's storage
	// (convert.go).
	conversion *conversion
	// builtin says the resource is one of kube-apiserver's own, whose
	// aggregated discovery names a response kind without group and version.
	builtin bool
	// custom is set for the resources of a CustomResourceDefinition
	// (crd_*.go); nil for built-ins.
	custom *customResource
}

// subresource is one subresource as discovery lists it.
type subresource struct {
	name string
	// kind is what requests and responses of the subresource carry
	// (autoscaling/v1 Scale for scale, the resource's own kind for status).
	kind  schema.GroupVersionKind
	verbs []string
}

func (r *resource) gvk() schema.GroupVersionKind { return r.gv.WithKind(r.kind) }

func (r *resource) storeResource() store.Resource {
	if r.conversion != nil {
		return store.Resource{Group: r.conversion.storage.Group, Resource: r.conversion.storage.Resource, Namespaced: r.namespaced}
	}
	name := r.name
	if r.storeAs != "" {
		name = r.storeAs
	}
	return store.Resource{Group: r.gv.Group, Resource: name, Namespaced: r.namespaced}
}

// allowedVerbs are the resource's verbs.
func (r *resource) allowedVerbs() []string {
	if r.verbs == nil {
		return allVerbs
	}
	return r.verbs
}

// subresourceList is what discovery lists of the resource's subresources.
func (r *resource) subresourceList() []subresource {
	if r.subresources != nil {
		return r.subresources
	}
	var out []subresource
	if r.status {
		out = append(out, subresource{name: "status", kind: r.gvk(), verbs: []string{"get", "patch", "update"}})
	}
	if r.eviction {
		out = append(out, subresource{name: "eviction", kind: policyV1.WithKind("Eviction"), verbs: []string{"create"}})
	}
	if r.custom != nil && r.custom.scale != nil {
		out = append(out, subresource{name: "scale", kind: scaleKind, verbs: []string{"get", "patch", "update"}})
	}
	return out
}

// subresource returns the named subresource, or nil.
func (r *resource) subresource(name string) *subresource {
	for _, s := range r.subresourceList() {
		if s.name == name {
			return &s
		}
	}
	return nil
}

var allVerbs = metav1.Verbs{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}

var (
	coreV1        = schema.GroupVersion{Version: "v1"}
	appsV1        = schema.GroupVersion{Group: "apps", Version: "v1"}
	rbacV1        = schema.GroupVersion{Group: "rbac.authorization.k8s.io", Version: "v1"}
	coordV1       = schema.GroupVersion{Group: "coordination.k8s.io", Version: "v1"}
	eventsV1      = schema.GroupVersion{Group: "events.k8s.io", Version: "v1"}
	policyV1      = schema.GroupVersion{Group: "policy", Version: "v1"}
	storageV1     = schema.GroupVersion{Group: "storage.k8s.io", Version: "v1"}
	autoscalingV1 = schema.GroupVersion{Group: "autoscaling", Version: "v1"}
	authnV1       = schema.GroupVersion{Group: "authentication.k8s.io", Version: "v1"}
	authzV1       = schema.GroupVersion{Group: "authorization.k8s.io", Version: "v1"}
)

// resources are the built-in resources every cluster serves (crd_set.go
// adds each cluster's CRDs): kube-apiserver's own (builtinResources,
// generated from its discovery; what each does beyond storing objects is
// in builtin_resources.go). Core and events.k8s.io Events are one storage,
// and so are autoscaling/v1 and v2 HorizontalPodAutoscalers (convert.go).
// PodDisruptionBudgets are honoured by evictions; nothing
// computes their status (no disruption controller), so whoever creates one
// sets it.
var resources = builtinResources

func init() {
	for _, r := range builtinResources {
		r.builtin = true
	}
	preferred := map[schema.GroupResource]bool{}
	for _, r := range resources {
		gr := schema.GroupResource{Group: r.gv.Group, Resource: r.name}
		r.conversion = conversionOf(r.gv, r.name)
		if preferred[gr] && r.conversion == nil {
			r.storeAs = r.name + "." + r.gv.Version
		}
		preferred[gr] = true
		r.status = r.subresource("status") != nil
		r.eviction = r.subresource("eviction") != nil
		r.portForward = r.subresource("portforward") != nil
	}
}

// groupVersions in the order discovery lists them (core first, then by
// group priority, each group's preferred version first).
var groupVersions = func() []schema.GroupVersion {
	var out []schema.GroupVersion
	for _, r := range resources {
		if !slices.Contains(out, r.gv) {
			out = append(out, r.gv)
		}
	}
	return out
}()

func lookup(gv schema.GroupVersion, name string) *resource {
	for _, r := range resources {
		if r.gv == gv && r.name == name {
			return r
		}
	}
	return nil
}

func servesGroupVersion(gv schema.GroupVersion) bool {
	return slices.Contains(groupVersions, gv)
}

// resourceList is the discovery document of one group version serving rs.
func resourceList(gv schema.GroupVersion, rs []*resource) *metav1.APIResourceList {
	list := &metav1.APIResourceList{
		TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
		GroupVersion: gv.String(),
	}
	for _, r := range rs {
		list.APIResources = append(list.APIResources, metav1.APIResource{
			Name: r.name, SingularName: r.singular, Namespaced: r.namespaced, Kind: r.kind,
			Verbs: r.allowedVerbs(), ShortNames: r.shortNames, Categories: r.categories,
			StorageVersionHash: r.storageVersionHash,
		})
		for _, s := range r.subresourceList() {
			sub := metav1.APIResource{Name: r.name + "/" + s.name, Namespaced: r.namespaced, Kind: s.kind.Kind, Verbs: s.verbs}
			// As kube-apiserver: the group and version only when they are
			// not the resource's own.
			if s.kind.GroupVersion() != gv {
				sub.Group, sub.Version = s.kind.Group, s.kind.Version
			}
			list.APIResources = append(list.APIResources, sub)
		}
	}
	return list
}
