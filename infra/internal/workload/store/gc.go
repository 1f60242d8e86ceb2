package store

import (
	"runtime"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/watch"
)

// The garbage collector, as kube-controller-manager's: an object whose
// owners (metadata.ownerReferences) are all gone is deleted; an owner
// deleted with propagationPolicy Foreground (the foregroundDeletion
// finalizer) goes once its blocking dependents are gone; one deleted with
// Orphan (the orphan finalizer) goes once its dependents no longer name it.
//
// It is driven by the store's own changes: every change updates an index
// from owner uid to dependents and queues the objects it may concern; a
// Collector's goroutines, shared by every store, work the queues in
// batches, cluster after cluster. Nothing scans a store periodically. The
// queue is not kept: what it would hold follows from the objects (an
// owner with a GC finalizer being deleted, a dependent whose owner is
// gone), so a store made from Restored objects queues it again, and work a
// restart interrupted is finished.

// DefaultCollectorBatch is how many queued objects of one store a
// Collector goroutine handles before it turns to the next store.
const DefaultCollectorBatch = 100

// CollectorOptions configure a Collector.
type CollectorOptions struct {
	// Workers is the number of goroutines. Default runtime.GOMAXPROCS.
	Workers int
	// Batch is how many queued objects of a store a goroutine handles
	// before the next store's turn. Default DefaultCollectorBatch.
	Batch int
}

// Collector runs the garbage collection of any number of stores on a
// fixed set of goroutines, so that a store costs no goroutine and a store
// with much to collect does not hold up the others.
type Collector struct {
	batch int

	mu      sync.Mutex
	cond    *sync.Cond
	ready   []*Store // stores with queued work, each at most once, in turn
	stopped bool
}

// NewCollector starts a Collector; Stop ends its goroutines.
func NewCollector(opts CollectorOptions) *Collector {
	if opts.Workers <= 0 {
		opts.Workers = runtime.GOMAXPROCS(0)
	}
	if opts.Batch <= 0 {
		opts.Batch = DefaultCollectorBatch
	}
	c := &Collector{batch: opts.Batch}
	c.cond = sync.NewCond(&c.mu)
	for range opts.Workers {
		go c.work()
	}
	return c
}

// defaultCollector serves the stores whose Options name no Collector.
var defaultCollector = sync.OnceValue(func() *Collector { return NewCollector(CollectorOptions{}) })

// Stop ends the Collector's goroutines; queued work stays queued.
func (c *Collector) Stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopped = true
	c.cond.Broadcast()
}

// schedule gives s a turn; called with s.mu held (s.mu before c.mu).
func (c *Collector) schedule(s *Store) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ready = append(c.ready, s)
	c.cond.Signal()
}

func (c *Collector) work() {
	for {
		c.mu.Lock()
		for len(c.ready) == 0 && !c.stopped {
			c.cond.Wait()
		}
		if c.stopped {
			c.mu.Unlock()
			return
		}
		s := c.ready[0]
		c.ready[0] = nil
		c.ready = c.ready[1:]
		c.mu.Unlock()
		s.collect(c.batch)
	}
}

// gcState is the store's part of the garbage collector; guarded by s.mu.
type gcState struct {
	collector *Collector
	// byUID finds an object by uid, as owner references name it.
	byUID map[types.UID]uidKey
	// dependents are the uids of the objects whose ownerReferences name
	// an owner uid, whether or not that owner exists: a slice, not a set,
	// since most owners have a few (a map costs some 200 bytes more).
	dependents map[types.UID][]types.UID
	// namespacedKinds says, for the kinds the store has held, whether
	// they are namespaced: a cluster-scoped dependent's reference to a
	// namespaced kind is never resolved.
	namespacedKinds map[schema.GroupKind]bool
	queue           []types.UID
	queued          map[types.UID]struct{}
	scheduled       bool
}

func (g *gcState) init(c *Collector) {
	if c == nil {
		c = defaultCollector()
	}
	g.collector = c
	g.byUID = map[types.UID]uidKey{}
	g.dependents = map[types.UID][]types.UID{}
	g.namespacedKinds = map[schema.GroupKind]bool{}
}

// GC finalizers and policies, as metav1 names them.
const (
	finalizerOrphan     = metav1.FinalizerOrphanDependents
	finalizerForeground = metav1.FinalizerDeleteDependents
)

// Propagation makes a Delete follow a propagation policy (kube-apiserver's
// DeleteOptions.propagationPolicy; orphanDependents true is Orphan, false
// Background): Orphan and Foreground leave the object with the orphan or
// foregroundDeletion finalizer for the garbage collector to finish;
// Background deletes it and lets the collector delete its dependents.
// Without it, a GC finalizer the object already has decides, else
// Background.
func Propagation(p metav1.DeletionPropagation) WriteOption {
	return func(o *writeOpts) { o.propagation = &p }
}

// gcFinalizers returns the finalizers a deletion with policy leaves, and
// whether they differ from existing (as a set): the GC finalizers go, and
// the policy's comes back, as kube-apiserver's registry does.
func gcFinalizers(existing []string, policy *metav1.DeletionPropagation) ([]string, bool) {
	var want string
	if policy != nil {
		switch *policy {
		case metav1.DeletePropagationOrphan:
			want = finalizerOrphan
		case metav1.DeletePropagationForeground:
			want = finalizerForeground
		}
	} else {
		want = gcFinalizer(existing)
	}
	out := make([]string, 0, len(existing)+1)
	for _, f := range existing {
		if f != finalizerOrphan && f != finalizerForeground {
			out = append(out, f)
		}
	}
	if want != "" {
		out = append(out, want)
	}
	changed := len(out) != len(existing)
	for _, f := range out {
		if !slices.Contains(existing, f) {
			changed = true
		}
	}
	return out, changed
}

// gcFinalizer is the first GC finalizer among finalizers, or "".
func gcFinalizer(finalizers []string) string {
	for _, f := range finalizers {
		if f == finalizerOrphan || f == finalizerForeground {
			return f
		}
	}
	return ""
}

// gcPending is the GC finalizer of an object being deleted, or "".
func gcPending(obj *unstructured.Unstructured) string {
	if obj == nil || obj.GetDeletionTimestamp() == nil {
		return ""
	}
	return gcFinalizer(obj.GetFinalizers())
}

// validateGCMeta checks what the collector relies on, as kube-apiserver's
// ObjectMeta validation does: well-formed owner references, at most one
// controller, and not both GC finalizers.
func validateGCMeta(obj *unstructured.Unstructured) error {
	var errs field.ErrorList
	if hasOwnerRefs(obj) {
		errs = append(errs, apivalidation.ValidateOwnerReferences(obj.GetOwnerReferences(), field.NewPath("metadata", "ownerReferences"))...)
	}
	if fins := obj.GetFinalizers(); slices.Contains(fins, finalizerOrphan) && slices.Contains(fins, finalizerForeground) {
		errs = append(errs, apivalidation.ValidateFinalizers(fins, field.NewPath("metadata", "finalizers"))...)
	}
	if len(errs) == 0 {
		return nil
	}
	return newInvalid(obj, errs)
}

func hasOwnerRefs(obj *unstructured.Unstructured) bool {
	refs, found, _ := unstructured.NestedFieldNoCopy(obj.Object, "metadata", "ownerReferences")
	if !found {
		return false
	}
	l, ok := refs.([]any)
	return ok && len(l) > 0
}

func ownerRefs(obj *unstructured.Unstructured) []metav1.OwnerReference {
	if obj == nil || !hasOwnerRefs(obj) {
		return nil
	}
	return obj.GetOwnerReferences()
}

func sameOwnerRefs(a, b *unstructured.Unstructured) bool {
	ra, _, _ := unstructured.NestedFieldNoCopy(a.Object, "metadata", "ownerReferences")
	rb, _, _ := unstructured.NestedFieldNoCopy(b.Object, "metadata", "ownerReferences")
	if ra == nil || rb == nil {
		return ra == nil && rb == nil
	}
	return equality.Semantic.DeepEqual(ra, rb)
}

func resourceOf(k key) Resource {
	return Resource{Group: k.group, Resource: k.resource, Namespaced: k.namespace != ""}
}

func groupOf(apiVersion string) string {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return apiVersion
	}
	return gv.Group
}

// uidKey is a key as byUID holds it: the group and resource shared by the
// objects of the resource, so that an entry takes 40 bytes, not 64.
type uidKey struct {
	gr              *groupResource
	namespace, name string
}

type groupResource struct{ group, resource string }

// groupResources holds one copy of every group and resource any store of
// the process indexed: a few hundred at most (the built-ins and the CRDs).
var groupResources = struct {
	sync.Mutex
	m map[groupResource]*groupResource
}{m: map[groupResource]*groupResource{}}

func internGroupResource(group, resource string) *groupResource {
	groupResources.Lock()
	defer groupResources.Unlock()
	gr := groupResources.m[groupResource{group, resource}]
	if gr == nil {
		gr = &groupResource{group, resource}
		groupResources.m[*gr] = gr
	}
	return gr
}

// keyOfUID finds the key of the object uid names; s.mu is held.
func (s *Store) keyOfUID(uid types.UID) (key, bool) {
	u, ok := s.gc.byUID[uid]
	if !ok {
		return key{}, false
	}
	return key{group: u.gr.group, resource: u.gr.resource, namespace: u.namespace, name: u.name}, true
}

// gcIndex adds obj to the indexes; s.mu is held.
func (s *Store) gcIndex(res Resource, k key, obj *unstructured.Unstructured) {
	uid := obj.GetUID()
	s.gc.byUID[uid] = uidKey{gr: internGroupResource(k.group, k.resource), namespace: k.namespace, name: k.name}
	gk := schema.GroupKind{Group: groupOf(obj.GetAPIVersion()), Kind: obj.GetKind()}
	if _, known := s.gc.namespacedKinds[gk]; !known && gk.Kind != "" {
		s.gc.namespacedKinds[gk] = res.Namespaced
	}
	s.gcIndexRefs(uid, ownerRefs(obj))
}

func (s *Store) gcIndexRefs(uid types.UID, refs []metav1.OwnerReference) {
	for _, r := range refs {
		if deps := s.gc.dependents[r.UID]; !slices.Contains(deps, uid) {
			s.gc.dependents[r.UID] = append(deps, uid)
		}
	}
}

func (s *Store) gcUnindexRefs(uid types.UID, refs []metav1.OwnerReference) {
	for _, r := range refs {
		deps := s.gc.dependents[r.UID]
		if i := slices.Index(deps, uid); i >= 0 {
			deps = slices.Delete(deps, i, i+1)
			if len(deps) == 0 {
				delete(s.gc.dependents, r.UID)
			} else {
				s.gc.dependents[r.UID] = deps
			}
		}
	}
}

// gcObserve keeps the indexes and queues what a change may concern; emit
// calls it with s.mu held.
func (s *Store) gcObserve(e event) {
	uid := e.obj.GetUID()
	switch e.typ {
	case watch.Added:
		s.gcIndex(e.res, keyOf(e.res, e.obj.GetNamespace(), e.obj.GetName()), e.obj)
		if s.gcNeedsCollection(e.res, e.obj) {
			s.gcEnqueue(uid)
		}
	case watch.Modified:
		refsChanged := !sameOwnerRefs(e.prev, e.obj)
		if refsChanged {
			prevRefs := ownerRefs(e.prev)
			s.gcUnindexRefs(uid, prevRefs)
			s.gcIndexRefs(uid, ownerRefs(e.obj))
			// An owner waiting for this dependent may be done with it.
			s.gcEnqueueDeletingOwners(prevRefs)
		}
		switch pending := gcPending(e.obj); {
		case pending != "" && pending != gcPending(e.prev):
			s.gcEnqueue(uid)
		case refsChanged && s.gcNeedsCollection(e.res, e.obj):
			s.gcEnqueue(uid)
		}
	case watch.Deleted:
		refs := ownerRefs(e.prev)
		delete(s.gc.byUID, uid)
		s.gcUnindexRefs(uid, refs)
		for _, dep := range s.gc.dependents[uid] {
			s.gcEnqueue(dep)
		}
		s.gcEnqueueDeletingOwners(refs)
	}
}

// gcEnqueueDeletingOwners queues the owners among refs that wait for
// their dependents.
func (s *Store) gcEnqueueDeletingOwners(refs []metav1.OwnerReference) {
	for _, r := range refs {
		if k, ok := s.keyOfUID(r.UID); ok && s.objects[k].deletingDependents() {
			s.gcEnqueue(r.UID)
		}
	}
}

// gcEnqueue queues uid for the collector; s.mu is held.
func (s *Store) gcEnqueue(uid types.UID) {
	if s.closed {
		return
	}
	if _, ok := s.gc.queued[uid]; ok {
		return
	}
	if s.gc.queued == nil {
		s.gc.queued = map[types.UID]struct{}{}
	}
	s.gc.queued[uid] = struct{}{}
	s.gc.queue = append(s.gc.queue, uid)
	if !s.gc.scheduled {
		s.gc.scheduled = true
		s.gc.collector.schedule(s)
	}
}

// gcRestore indexes the restored objects and queues the work a restart
// may have interrupted; s.mu need not be held (New).
func (s *Store) gcRestore(restored []Restored) {
	for _, r := range restored {
		s.gcIndex(r.Resource, keyOf(r.Resource, r.Object.GetNamespace(), r.Object.GetName()), r.Object)
	}
	for _, r := range restored {
		if gcPending(r.Object) != "" || s.gcNeedsCollection(r.Resource, r.Object) {
			s.gcEnqueue(r.Object.GetUID())
		}
	}
}

// collect handles up to batch queued objects, and asks for another turn
// while some are left.
func (s *Store) collect(batch int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := 0; i < batch && len(s.gc.queue) > 0 && !s.closed; i++ {
		uid := s.gc.queue[0]
		s.gc.queue = s.gc.queue[1:]
		delete(s.gc.queued, uid)
		s.collectOne(uid)
	}
	if len(s.gc.queue) > 0 && !s.closed {
		s.gc.collector.schedule(s)
		return
	}
	s.gc.scheduled = false
	s.gc.queue, s.gc.queued = nil, nil
}

// CollectorIdle says whether the garbage collector has nothing queued for
// this store.
func (s *Store) CollectorIdle() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.gc.queue) == 0
}

func (s *Store) collectOne(uid types.UID) {
	k, ok := s.keyOfUID(uid)
	if !ok {
		return
	}
	e := s.objects[k]
	res := resourceOf(k)
	switch {
	case e.deleting && e.gc == finalizerOrphan:
		s.orphanDependents(res, k, e, e.decode())
	case e.deleting && e.gc == finalizerForeground:
		s.finishForeground(res, k, e, e.decode())
	case !e.deleting:
		s.collectDependent(res, k, e, e.decode())
	}
}

// dependentsOf returns the objects naming uid as an owner, sorted by uid
// so that the collector's order does not depend on map order.
func (s *Store) dependentsOf(uid types.UID) []types.UID {
	deps := slices.Clone(s.gc.dependents[uid])
	slices.Sort(deps)
	return deps
}

// reaches says whether an owner stored at ok can own an object stored at
// dk: a namespaced owner only owns objects of its namespace (to others, a
// cluster-scoped one included, its uid names nothing they can resolve).
func reaches(ok, dk key) bool {
	return ok.namespace == "" || ok.namespace == dk.namespace
}

// orphanDependents removes the owner's references from its dependents,
// then its orphan finalizer.
func (s *Store) orphanDependents(res Resource, k key, ownerEntry *entry, owner *unstructured.Unstructured) {
	uid := owner.GetUID()
	for _, d := range s.dependentsOf(uid) {
		dk, ok := s.keyOfUID(d)
		if !ok || !reaches(k, dk) {
			continue
		}
		depEntry := s.objects[dk]
		dep := depEntry.decode()
		s.replaceLocked(resourceOf(dk), dk, depEntry, dep, withoutOwners(dep, map[types.UID]bool{uid: true}), nil)
	}
	next := owner.DeepCopy()
	next.SetFinalizers(slices.DeleteFunc(next.GetFinalizers(), func(f string) bool { return f == finalizerOrphan }))
	s.replaceLocked(res, k, ownerEntry, owner, next, nil)
}

// finishForeground has the dependents of an owner deleted in the
// foreground deleted, and removes its foregroundDeletion finalizer once
// none that blocks it (blockOwnerDeletion) is left.
func (s *Store) finishForeground(res Resource, k key, ownerEntry *entry, owner *unstructured.Unstructured) {
	uid := owner.GetUID()
	blocked := false
	for _, d := range s.dependentsOf(uid) {
		dk, ok := s.keyOfUID(d)
		if !ok || !reaches(k, dk) {
			continue
		}
		dep := s.objects[dk].decode()
		for _, r := range ownerRefs(dep) {
			if r.UID == uid && r.BlockOwnerDeletion != nil && *r.BlockOwnerDeletion {
				blocked = true
			}
		}
		if dep.GetDeletionTimestamp() == nil {
			s.gcEnqueue(d)
		}
	}
	if blocked {
		return
	}
	next := owner.DeepCopy()
	next.SetFinalizers(slices.DeleteFunc(next.GetFinalizers(), func(f string) bool { return f == finalizerForeground }))
	s.replaceLocked(res, k, ownerEntry, owner, next, nil)
}

// ownerState is what an owner reference resolves to.
type ownerState int

const (
	ownerSolid   ownerState = iota // exists (or cannot be resolved): keeps the dependent
	ownerAbsent                    // gone, or not what the reference names
	ownerWaiting                   // being deleted in the foreground, waiting for its dependents
)

// resolve finds the owner a reference of dep names, as
// kube-controller-manager does: by uid, with the same kind and name; a
// namespaced owner must be in dep's namespace (else it is absent to
// dep), and a cluster-scoped dep's reference to a namespaced kind is
// unresolvable, which keeps dep.
func (s *Store) resolve(res Resource, dep *unstructured.Unstructured, ref metav1.OwnerReference) ownerState {
	ok, found := s.keyOfUID(ref.UID)
	if !found {
		if !res.Namespaced && s.gc.namespacedKinds[schema.GroupKind{Group: groupOf(ref.APIVersion), Kind: ref.Kind}] {
			return ownerSolid
		}
		return ownerAbsent
	}
	owner := s.objects[ok]
	if ok.name != ref.Name || owner.gk.kind != ref.Kind || owner.gk.group != groupOf(ref.APIVersion) {
		return ownerAbsent
	}
	if ok.namespace != "" {
		if !res.Namespaced {
			return ownerSolid
		}
		if ok.namespace != dep.GetNamespace() {
			return ownerAbsent
		}
	}
	if owner.deletingDependents() {
		return ownerWaiting
	}
	return ownerSolid
}

// gcNeedsCollection says whether a dependent not being deleted has an
// owner that is gone or waiting for it.
func (s *Store) gcNeedsCollection(res Resource, obj *unstructured.Unstructured) bool {
	if obj.GetDeletionTimestamp() != nil {
		return false
	}
	for _, r := range ownerRefs(obj) {
		if s.resolve(res, obj, r) != ownerSolid {
			return true
		}
	}
	return false
}

// collectDependent is kube-controller-manager's attemptToDeleteItem: a
// dependent with an owner left loses its references to the owners that
// are gone or waiting; one with none left is deleted (in the foreground
// when an owner waits for it and it has dependents of its own).
func (s *Store) collectDependent(res Resource, k key, e *entry, obj *unstructured.Unstructured) {
	refs := ownerRefs(obj)
	if len(refs) == 0 {
		return
	}
	solid := 0
	drop := map[types.UID]bool{}
	waiting := false
	for _, r := range refs {
		switch s.resolve(res, obj, r) {
		case ownerSolid:
			solid++
		case ownerAbsent:
			drop[r.UID] = true
		case ownerWaiting:
			drop[r.UID] = true
			waiting = true
		}
	}
	switch {
	case solid > 0:
		if len(drop) > 0 {
			s.replaceLocked(res, k, e, obj, withoutOwners(obj, drop), nil)
		}
	case waiting && len(s.gc.dependents[obj.GetUID()]) > 0:
		for _, d := range s.dependentsOf(obj.GetUID()) {
			if dk, ok := s.keyOfUID(d); ok && s.objects[dk].deletingDependents() {
				// A cycle of foreground deletions: this one stops
				// blocking its owners, as kube-controller-manager does.
				next := obj.DeepCopy()
				unblocked := ownerRefs(next)
				for i := range unblocked {
					unblocked[i].BlockOwnerDeletion = new(bool)
				}
				next.SetOwnerReferences(unblocked)
				obj, e, _ = s.replaceLocked(res, k, e, obj, next, nil)
				break
			}
		}
		s.deleteLocked(res, k, e, obj, ptrTo(metav1.DeletePropagationForeground))
	default:
		// Its own GC finalizer, if it has one, decides how its dependents go.
		s.deleteLocked(res, k, e, obj, nil)
	}
}

func ptrTo[T any](v T) *T { return &v }

// withoutOwners returns a copy of obj without the references to drop.
func withoutOwners(obj *unstructured.Unstructured, drop map[types.UID]bool) *unstructured.Unstructured {
	next := obj.DeepCopy()
	refs := slices.DeleteFunc(ownerRefs(next), func(r metav1.OwnerReference) bool { return drop[r.UID] })
	if len(refs) == 0 {
		unstructured.RemoveNestedField(next.Object, "metadata", "ownerReferences")
	} else {
		next.SetOwnerReferences(refs)
	}
	return next
}

// DeleteAllOf deletes every object of res, in every namespace, as
// kube-apiserver's CustomResourceDefinition finalizer deletes a CRD's
// objects (propagationPolicy Background: their dependents are collected
// after them). It returns how many are left: those finalizers hold, which
// go with their last finalizer.
func (s *Store) DeleteAllOf(res Resource) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var keys []key
	for k := range s.objects {
		if k.group == res.Group && k.resource == res.Resource {
			keys = append(keys, k)
		}
	}
	left := 0
	for _, k := range keys {
		e, ok := s.objects[k]
		if !ok {
			continue
		}
		if _, gone := s.deleteLocked(res, k, e, e.decode(), ptrTo(metav1.DeletePropagationBackground)); !gone {
			left++
		}
	}
	return left
}
