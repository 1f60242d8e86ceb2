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
	// status says the resource has a status subresource: updates of the
	// main resource keep the stored status, updates of status keep the rest.
	status bool
	// eviction says the resource has the eviction subresource (pods).
	eviction bool
	// portForward says the resource has the portforward subresource
	// (pods), served when Options.PortForward is set.
	portForward bool
	// custom is set for the resources of a CustomResourceDefinition
	// (crd_*.go); nil for built-ins.
	custom *customResource
}

func (r *resource) gvk() schema.GroupVersionKind { return r.gv.WithKind(r.kind) }

func (r *resource) storeResource() store.Resource {
	return store.Resource{Group: r.gv.Group, Resource: r.name, Namespaced: r.namespaced}
}

var allVerbs = metav1.Verbs{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}

var (
	coreV1    = schema.GroupVersion{Version: "v1"}
	appsV1    = schema.GroupVersion{Group: "apps", Version: "v1"}
	rbacV1    = schema.GroupVersion{Group: "rbac.authorization.k8s.io", Version: "v1"}
	coordV1   = schema.GroupVersion{Group: "coordination.k8s.io", Version: "v1"}
	eventsV1  = schema.GroupVersion{Group: "events.k8s.io", Version: "v1"}
	policyV1  = schema.GroupVersion{Group: "policy", Version: "v1"}
	storageV1 = schema.GroupVersion{Group: "storage.k8s.io", Version: "v1"}
)

// resources is everything served. Core and events.k8s.io Events are stored
// apart (a real cluster serves one storage in both shapes).
// PodDisruptionBudgets are honoured by evictions; nothing computes their
// status (no disruption controller), so whoever creates one sets it.
// Volumes are served because Cluster API's machine deletion lists
// VolumeAttachments (and reads PersistentVolumes and their claims) while it
// waits for a drained node's volumes to detach; nothing attaches any.
var resources = []*resource{
	{gv: coreV1, name: "namespaces", singular: "namespace", kind: "Namespace", shortNames: []string{"ns"}, status: true},
	{gv: coreV1, name: "nodes", singular: "node", kind: "Node", shortNames: []string{"no"}, status: true},
	{gv: coreV1, name: "pods", singular: "pod", kind: "Pod", namespaced: true, shortNames: []string{"po"}, categories: []string{"all"}, status: true, eviction: true, portForward: true},
	{gv: coreV1, name: "configmaps", singular: "configmap", kind: "ConfigMap", namespaced: true, shortNames: []string{"cm"}},
	{gv: coreV1, name: "secrets", singular: "secret", kind: "Secret", namespaced: true},
	{gv: coreV1, name: "serviceaccounts", singular: "serviceaccount", kind: "ServiceAccount", namespaced: true, shortNames: []string{"sa"}},
	{gv: coreV1, name: "events", singular: "event", kind: "Event", namespaced: true, shortNames: []string{"ev"}},
	{gv: appsV1, name: "deployments", singular: "deployment", kind: "Deployment", namespaced: true, shortNames: []string{"deploy"}, categories: []string{"all"}, status: true},
	{gv: appsV1, name: "daemonsets", singular: "daemonset", kind: "DaemonSet", namespaced: true, shortNames: []string{"ds"}, categories: []string{"all"}, status: true},
	{gv: rbacV1, name: "roles", singular: "role", kind: "Role", namespaced: true},
	{gv: rbacV1, name: "rolebindings", singular: "rolebinding", kind: "RoleBinding", namespaced: true},
	{gv: rbacV1, name: "clusterroles", singular: "clusterrole", kind: "ClusterRole"},
	{gv: rbacV1, name: "clusterrolebindings", singular: "clusterrolebinding", kind: "ClusterRoleBinding"},
	{gv: coordV1, name: "leases", singular: "lease", kind: "Lease", namespaced: true},
	{gv: eventsV1, name: "events", singular: "event", kind: "Event", namespaced: true, shortNames: []string{"ev"}},
	{gv: policyV1, name: "poddisruptionbudgets", singular: "poddisruptionbudget", kind: "PodDisruptionBudget", namespaced: true, shortNames: []string{"pdb"}, status: true},
	{gv: coreV1, name: "persistentvolumes", singular: "persistentvolume", kind: "PersistentVolume", shortNames: []string{"pv"}, status: true},
	{gv: coreV1, name: "persistentvolumeclaims", singular: "persistentvolumeclaim", kind: "PersistentVolumeClaim", namespaced: true, shortNames: []string{"pvc"}, status: true},
	{gv: storageV1, name: "volumeattachments", singular: "volumeattachment", kind: "VolumeAttachment", status: true},
}

// groupVersions in the order discovery lists them (core first).
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

// resourceList is the discovery document of one group version.
func resourceList(gv schema.GroupVersion) *metav1.APIResourceList {
	list := &metav1.APIResourceList{
		TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
		GroupVersion: gv.String(),
	}
	for _, r := range resources {
		if r.gv != gv {
			continue
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
		if r.eviction {
			list.APIResources = append(list.APIResources, metav1.APIResource{
				Name: r.name + "/eviction", Namespaced: r.namespaced, Group: policyV1.Group, Version: policyV1.Version,
				Kind: "Eviction", Verbs: metav1.Verbs{"create"},
			})
		}
	}
	return list
}

func apiGroup(group string) *metav1.APIGroup {
	var g *metav1.APIGroup
	for _, gv := range groupVersions {
		if gv.Group != group || group == "" {
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

func apiGroupList() *metav1.APIGroupList {
	list := &metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}}
	seen := map[string]bool{}
	for _, gv := range groupVersions {
		if gv.Group == "" || seen[gv.Group] {
			continue
		}
		seen[gv.Group] = true
		list.Groups = append(list.Groups, *apiGroup(gv.Group))
	}
	return list
}
