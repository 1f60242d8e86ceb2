package apiserver

import (
	"cmp"
	"fmt"
	"net/http"
	"runtime"
	"slices"
	"sync"
	"time"
	"weak"

	apiextensionshelpers "k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/version"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
)

// crdRegistry knows, for every cluster store the Handler has served, the
// resources that cluster's CustomResourceDefinitions add. A cluster's set
// is read from its store on its first request (so CRDs restored from a
// journal are served again after a restart) and made again, under the
// cluster's lock, after every write of a CRD through the Handler, before
// the write is answered: a client that created a CRD can use its
// resources with its next request. A cluster without CRDs costs one map
// entry, and shares builtinSet.
//
// What kube-apiserver's CRD controllers do asynchronously, the remake
// does at once: the CRD's status (acceptedNames, NamesAccepted,
// Established, storedVersions, Terminating) and, for a CRD being deleted,
// the deletion of its objects, then of its cleanup finalizer.
//
// The zero value is ready.
type crdRegistry struct {
	mu       sync.Mutex
	clusters map[weak.Pointer[store.Store]]*clusterCRDs
}

// clusterCRDs is one cluster's CRD state.
type clusterCRDs struct {
	mu      sync.Mutex
	current *resourceSet
	// terminating says a CRD is being deleted: writes of custom objects
	// then make the set again, to finish it once its objects are gone.
	terminating bool
	// served caches what a CRD generation needs to be served (schemas,
	// validators), by uid; a status change does not rebuild it.
	served map[types.UID]*crdServing
}

// set is the cluster's current resource set.
func (c *crdRegistry) set(st *store.Store) (*resourceSet, error) {
	cc, err := c.cluster(st)
	if err != nil {
		return nil, err
	}
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return cc.current, nil
}

func (c *crdRegistry) cluster(st *store.Store) (*clusterCRDs, error) {
	key := weak.Make(st)
	c.mu.Lock()
	if c.clusters == nil {
		c.clusters = map[weak.Pointer[store.Store]]*clusterCRDs{}
	}
	cc, ok := c.clusters[key]
	if !ok {
		cc = &clusterCRDs{served: map[types.UID]*crdServing{}}
		c.clusters[key] = cc
		// The entry goes with the store (a removed cluster).
		runtime.AddCleanup(st, func(k weak.Pointer[store.Store]) {
			c.mu.Lock()
			delete(c.clusters, k)
			c.mu.Unlock()
		}, key)
		// Built under the cluster's lock, taken before the registry's is
		// let go, so that no request sees the cluster before its set.
		cc.mu.Lock()
		c.mu.Unlock()
		defer cc.mu.Unlock()
		if err := cc.remake(st); err != nil {
			c.mu.Lock()
			delete(c.clusters, key)
			c.mu.Unlock()
			return nil, err
		}
		return cc, nil
	}
	c.mu.Unlock()
	return cc, nil
}

// serve serves a request, and makes the cluster's set again after a write
// that may change it: any write of a CRD, under the cluster's lock, so
// that no request of the cluster sees the CRD written and the set not yet
// made again; and any other write while a CRD is being deleted (removing
// the last finalizer of its last object, or deleting its namespace, ends
// it).
func (c *crdRegistry) serve(r *http.Request, req *request, serve func()) {
	if r.Method == http.MethodGet || r.URL.Query().Has("dryRun") {
		serve()
		return
	}
	cc, err := c.cluster(req.store)
	if err != nil {
		serve()
		return
	}
	if isCRDResource(req.res) {
		cc.mu.Lock()
		defer cc.mu.Unlock()
		serve()
		// An error leaves the last set served; the next CRD write tries again.
		_ = cc.remake(req.store)
		return
	}
	serve()
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.terminating {
		_ = cc.remake(req.store)
	}
}

// remake reads the cluster's CRDs, brings their status up to date, cleans
// up the ones being deleted and makes the set. Called with cc.mu held.
func (cc *clusterCRDs) remake(st *store.Store) error {
	items, _, err := st.List(crdResource.storeResource(), "", store.ListOptions{})
	if err != nil {
		return fmt.Errorf("failed to list the CustomResourceDefinitions: %w", err)
	}
	crds := make([]*apiextensionsv1.CustomResourceDefinition, 0, len(items))
	for _, u := range items {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := k8sruntime.DefaultUnstructuredConverter.FromUnstructured(u.Object, crd); err != nil {
			return apierrors.NewInternalError(fmt.Errorf("failed to decode the CustomResourceDefinition %s: %w", u.GetName(), err))
		}
		crds = append(crds, crd)
	}
	// The older CRD keeps a name two of them ask for, as with
	// kube-apiserver's naming controller (which goes by what is already
	// accepted).
	slices.SortStableFunc(crds, func(a, b *apiextensionsv1.CustomResourceDefinition) int {
		return cmp.Or(a.CreationTimestamp.Time.Compare(b.CreationTimestamp.Time), cmp.Compare(a.Name, b.Name))
	})

	var live []*apiextensionsv1.CustomResourceDefinition
	cc.terminating = false
	for _, crd := range crds {
		next := crd.DeepCopy()
		next.Status = crdStatus(crd, crds)
		if !equality.Semantic.DeepEqual(next.Status, crd.Status) {
			stored, err := updateCRD(st, next)
			if err != nil {
				return err
			}
			*crd = *stored
		}
		if crd.DeletionTimestamp != nil {
			gone, err := cleanUpCRD(st, crd)
			if err != nil {
				return err
			}
			if gone {
				continue
			}
			cc.terminating = true
		}
		live = append(live, crd)
	}

	var custom []*resource
	var established []*apiextensionsv1.CustomResourceDefinition
	seen := map[types.UID]bool{}
	for _, crd := range live {
		if !apiextensionshelpers.IsCRDConditionTrue(crd, apiextensionsv1.Established) {
			continue
		}
		established = append(established, crd)
		seen[crd.UID] = true
		served := cc.served[crd.UID]
		if served == nil || served.generation != crd.Generation {
			if served, err = newCRDServing(crd); err != nil {
				// Validation keeps such a CRD out; one that is stored
				// anyway is not served rather than failing the cluster.
				continue
			}
			cc.served[crd.UID] = served
		}
		custom = append(custom, served.resources(crd)...)
	}
	for uid := range cc.served {
		if !seen[uid] {
			delete(cc.served, uid)
		}
	}
	slices.SortStableFunc(custom, func(a, b *resource) int {
		return cmp.Or(cmp.Compare(a.gv.Group, b.gv.Group),
			-version.CompareKubeAwareVersionStrings(a.gv.Version, b.gv.Version),
			cmp.Compare(a.name, b.name))
	})
	if len(custom) == 0 {
		cc.current = builtinSet
		return nil
	}
	cc.current = newResourceSet(custom, established)
	return nil
}

// crdStatus is the status kube-apiserver's CRD controllers give a CRD:
// the names it may use (those no other CRD of its group has taken),
// NamesAccepted, Established once they are, Terminating while it is being
// deleted, and its storage version among storedVersions.
func crdStatus(crd *apiextensionsv1.CustomResourceDefinition, all []*apiextensionsv1.CustomResourceDefinition) apiextensionsv1.CustomResourceDefinitionStatus {
	taken, takenKinds := sets.New[string](), sets.New[string]()
	for _, other := range all {
		if other.UID == crd.UID || other.Spec.Group != crd.Spec.Group {
			continue
		}
		a := other.Status.AcceptedNames
		taken.Insert(a.Plural, a.Singular)
		taken.Insert(a.ShortNames...)
		takenKinds.Insert(a.Kind, a.ListKind)
	}
	want, accepted := crd.Spec.Names, crd.Status.AcceptedNames
	next := accepted
	var reason, message string
	conflict := func(r string, name string) {
		reason, message = r, fmt.Sprintf("%q is already in use", name)
	}
	free := func(requested, current string, used sets.Set[string]) bool {
		return requested == current || !used.Has(requested)
	}
	if free(want.Plural, accepted.Plural, taken) {
		next.Plural = want.Plural
	} else {
		conflict("PluralConflict", want.Plural)
	}
	if free(want.Singular, accepted.Singular, taken) {
		next.Singular = want.Singular
	} else {
		conflict("SingularConflict", want.Singular)
	}
	shortOK := true
	for _, s := range want.ShortNames {
		if !slices.Contains(accepted.ShortNames, s) && taken.Has(s) {
			shortOK = false
			conflict("ShortNamesConflict", s)
		}
	}
	if shortOK {
		next.ShortNames = want.ShortNames
	}
	if free(want.Kind, accepted.Kind, takenKinds) {
		next.Kind = want.Kind
	} else {
		conflict("KindConflict", want.Kind)
	}
	if free(want.ListKind, accepted.ListKind, takenKinds) {
		next.ListKind = want.ListKind
	} else {
		conflict("ListKindConflict", want.ListKind)
	}
	next.Categories = want.Categories

	out := crd.Status.DeepCopy()
	out.AcceptedNames = next
	namesAccepted := apiextensionsv1.CustomResourceDefinitionCondition{
		Type: apiextensionsv1.NamesAccepted, Status: apiextensionsv1.ConditionTrue, Reason: "NoConflicts", Message: "no conflicts found",
	}
	if reason != "" {
		namesAccepted = apiextensionsv1.CustomResourceDefinitionCondition{
			Type: apiextensionsv1.NamesAccepted, Status: apiextensionsv1.ConditionFalse, Reason: reason, Message: message,
		}
	}
	setCRDCondition(out, namesAccepted)
	// Established stays True once it is (the resources keep their
	// accepted names); until then it follows NamesAccepted.
	tmp := &apiextensionsv1.CustomResourceDefinition{Status: *out}
	if !apiextensionshelpers.IsCRDConditionTrue(tmp, apiextensionsv1.Established) {
		established := apiextensionsv1.CustomResourceDefinitionCondition{
			Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionTrue, Reason: "InitialNamesAccepted", Message: "the initial names have been accepted",
		}
		if reason != "" {
			established = apiextensionsv1.CustomResourceDefinitionCondition{
				Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionFalse, Reason: "NotAccepted", Message: "not all names are accepted",
			}
		}
		setCRDCondition(out, established)
	}
	if crd.DeletionTimestamp != nil {
		setCRDCondition(out, apiextensionsv1.CustomResourceDefinitionCondition{
			Type: apiextensionsv1.Terminating, Status: apiextensionsv1.ConditionTrue,
			Reason: "InstanceDeletionInProgress", Message: "CustomResource deletion is in progress",
		})
	}
	for _, v := range crd.Spec.Versions {
		if v.Storage && !slices.Contains(out.StoredVersions, v.Name) {
			out.StoredVersions = append(out.StoredVersions, v.Name)
		}
	}
	return *out
}

// setCRDCondition sets a condition, its transition time changing only with
// its status.
func setCRDCondition(status *apiextensionsv1.CustomResourceDefinitionStatus, c apiextensionsv1.CustomResourceDefinitionCondition) {
	for i, old := range status.Conditions {
		if old.Type != c.Type {
			continue
		}
		c.LastTransitionTime = old.LastTransitionTime
		if old.Status != c.Status {
			c.LastTransitionTime = metav1.NewTime(time.Now().Truncate(time.Second))
		}
		status.Conditions[i] = c
		return
	}
	c.LastTransitionTime = metav1.NewTime(time.Now().Truncate(time.Second))
	status.Conditions = append(status.Conditions, c)
}

// updateCRD stores a CRD the registry changed (status, finalizers).
func updateCRD(st *store.Store, crd *apiextensionsv1.CustomResourceDefinition) (*apiextensionsv1.CustomResourceDefinition, error) {
	m, err := k8sruntime.DefaultUnstructuredConverter.ToUnstructured(crd)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("failed to encode the CustomResourceDefinition %s: %w", crd.Name, err))
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(crdResource.gvk())
	stored, err := st.Update(crdResource.storeResource(), u)
	if apierrors.IsNotFound(err) {
		// Gone meanwhile (its finalizer removed by someone else).
		return crd, nil
	}
	if err != nil {
		return nil, fmt.Errorf("failed to update the CustomResourceDefinition %s: %w", crd.Name, err)
	}
	out := &apiextensionsv1.CustomResourceDefinition{}
	if err := k8sruntime.DefaultUnstructuredConverter.FromUnstructured(stored.Object, out); err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("failed to decode the CustomResourceDefinition %s: %w", crd.Name, err))
	}
	return out, nil
}

// crdCleanupFinalizer holds a CRD being deleted until its objects are gone,
// as in kube-apiserver.
const crdCleanupFinalizer = apiextensionsv1.CustomResourceCleanupFinalizer

// cleanUpCRD deletes the objects of a CRD being deleted (objects with
// finalizers are marked, and go with their last finalizer), then, once
// none is left, removes the cleanup finalizer. It says whether the CRD is
// gone.
func cleanUpCRD(st *store.Store, crd *apiextensionsv1.CustomResourceDefinition) (bool, error) {
	if !slices.Contains(crd.Finalizers, crdCleanupFinalizer) {
		return len(crd.Finalizers) == 0, nil
	}
	res := store.Resource{Group: crd.Spec.Group, Resource: crd.Status.AcceptedNames.Plural, Namespaced: crd.Spec.Scope == apiextensionsv1.NamespaceScoped}
	if res.Resource != "" {
		items, _, err := st.List(res, "", store.ListOptions{})
		if err != nil {
			return false, fmt.Errorf("failed to list the objects of %s: %w", crd.Name, err)
		}
		left := 0
		for _, i := range items {
			_, gone, err := st.Delete(res, i.GetNamespace(), i.GetName(), store.Preconditions{})
			if err != nil && !apierrors.IsNotFound(err) {
				return false, fmt.Errorf("failed to delete %s %s/%s: %w", crd.Name, i.GetNamespace(), i.GetName(), err)
			}
			if err == nil && !gone {
				left++
			}
		}
		if left > 0 {
			return false, nil
		}
	}
	next := crd.DeepCopy()
	next.Finalizers = slices.DeleteFunc(next.Finalizers, func(f string) bool { return f == crdCleanupFinalizer })
	if _, err := updateCRD(st, next); err != nil {
		return false, err
	}
	return len(next.Finalizers) == 0, nil
}
