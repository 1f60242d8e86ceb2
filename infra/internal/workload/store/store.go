package store

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/watch"
)

// Resource names a kind of object in the store: its API group and plural
// resource name (versions share storage, as in kube-apiserver), and whether
// its objects live in a namespace.
type Resource struct {
	Group      string
	Resource   string
	Namespaced bool
}

// GroupResource is the resource's group and name, as errors report them.
func (r Resource) GroupResource() schema.GroupResource {
	return schema.GroupResource{Group: r.Group, Resource: r.Resource}
}

// Namespaces is the core namespaces resource, which namespaced objects need.
var Namespaces = Resource{Resource: "namespaces"}

// Defaults of Options.
const (
	DefaultHistorySize      = 100
	DefaultHistoryAge       = 5 * time.Minute
	DefaultWatchQueueSize   = 1024
	DefaultBookmarkInterval = time.Minute
)

// DefaultNamespaces are the namespaces kube-apiserver makes at start.
var DefaultNamespaces = []string{metav1.NamespaceDefault, metav1.NamespaceSystem, metav1.NamespacePublic, "kube-node-lease"}

// Options configure a Store; the zero value is usable.
type Options struct {
	// HistorySize is how many changes are kept for watches to resume from;
	// a watch from an older resourceVersion gets 410 Gone. Default
	// DefaultHistorySize. It bounds the store's memory beyond its objects.
	HistorySize int
	// HistoryAge is how long a change is kept for watches to resume from,
	// as etcd keeps revisions until kube-apiserver compacts them (every 5
	// minutes): a quiet cluster then holds no versions its objects have
	// replaced. Clients that take bookmarks (client-go's informers) resume
	// from a version no older than the last bookmark, which always stays
	// valid; others relist after a 410. Default DefaultHistoryAge.
	HistoryAge time.Duration
	// WatchQueueSize is how many events a watcher may fall behind before it
	// is closed (the client resumes from its last resourceVersion, as it
	// does after kube-apiserver drops a slow watcher). Initial events do
	// not count. Default DefaultWatchQueueSize.
	WatchQueueSize int
	// BookmarkInterval is how often watchers that allow bookmarks get one.
	// Default DefaultBookmarkInterval.
	BookmarkInterval time.Duration
	// InitialNamespaces are created by New. Nil means DefaultNamespaces;
	// an empty non-nil slice means none.
	InitialNamespaces []string
	// Now is the clock for creation and deletion timestamps. Default time.Now.
	Now func() time.Time
	// InitialResourceVersion is the resourceVersion before the first change.
	// Default: the microseconds since the epoch at New, so that a store
	// rebuilt after a restart never reuses the versions of the one before
	// and clients resuming from those get 410 Gone and relist. It is raised
	// past every Restored object's resourceVersion.
	InitialResourceVersion uint64
	// Restored are the objects a Journal kept, stored as they were (uid,
	// resourceVersion, timestamps and all) before InitialNamespaces are
	// made, so that an object survives the restart of the process serving
	// it unchanged.
	Restored []Restored
	// Journal receives every change, in order, under the store's lock: it
	// keeps the store across restarts (package journal). Nil keeps nothing.
	Journal Journal
	// Collector runs the store's garbage collection (ownerReferences).
	// Nil: one Collector shared by every store of the process.
	Collector *Collector
	// Limits bound what the cluster may hold and ask for; zero fields
	// take their defaults.
	Limits Limits
}

// Journal records a store's changes where they outlive the process.
type Journal interface {
	// Put records obj (stored at resourceVersion rv) as res's current
	// state of its key; raw is obj's JSON, as the store keeps it. Neither
	// is ever modified afterwards: a journal that keeps raw shares the
	// store's memory, where keeping obj would double it.
	Put(res Resource, obj *unstructured.Unstructured, raw []byte, rv uint64)
	// Delete records that res's object namespace/name is gone at rv.
	Delete(res Resource, namespace, name string, rv uint64)
}

// Restored is one object a Journal kept.
type Restored struct {
	Resource Resource
	Object   *unstructured.Unstructured
	// Raw, when set, is Object's JSON, which the store keeps as it is
	// (sharing it with the journal) instead of encoding Object again.
	Raw []byte
}

type key struct {
	group, resource, namespace, name string
}

// event is one change, as kept in the history.
type event struct {
	typ       watch.EventType
	res       Resource
	namespace string
	cur       *entry // after the change (for deletions: the last state, with the deletion's resourceVersion)
	old       *entry // before the change; nil for additions
	// obj and prev are cur and old decoded, as the write made them: live
	// watchers and observers share them; the history keeps only entries.
	obj, prev *unstructured.Unstructured
	rv        uint64
	at        time.Time // when the change was made, for Options.HistoryAge
}

// Store holds the objects of one workload cluster. It is safe for concurrent use.
type Store struct {
	opts Options

	mu      sync.Mutex
	rv      uint64
	objects map[key]*entry
	// perNamespace counts the objects in each namespace, for namespace deletion.
	perNamespace map[string]int
	// history is a ring of the latest changes, grown up to HistorySize.
	history   []event
	histStart int
	// floor is the resourceVersion after which every change is in history.
	floor    uint64
	watchers map[*watcher]struct{}
	closed   bool

	gc  gcState
	lim limitState
	// observers see every change under the lock (observe.go).
	observers map[*observer]struct{}
}

// New returns a store holding opts.InitialNamespaces.
func New(opts Options) *Store {
	if opts.HistorySize <= 0 {
		opts.HistorySize = DefaultHistorySize
	}
	if opts.HistoryAge <= 0 {
		opts.HistoryAge = DefaultHistoryAge
	}
	if opts.WatchQueueSize <= 0 {
		opts.WatchQueueSize = DefaultWatchQueueSize
	}
	if opts.BookmarkInterval <= 0 {
		opts.BookmarkInterval = DefaultBookmarkInterval
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.InitialNamespaces == nil {
		opts.InitialNamespaces = DefaultNamespaces
	}
	opts.Limits = opts.Limits.withDefaults()
	if opts.InitialResourceVersion == 0 {
		opts.InitialResourceVersion = uint64(opts.Now().UnixMicro())
	}
	for _, r := range opts.Restored {
		if rv, err := parseRV(r.Object.GetResourceVersion()); err == nil && rv > opts.InitialResourceVersion {
			opts.InitialResourceVersion = rv
		}
	}
	s := &Store{
		opts:         opts,
		rv:           opts.InitialResourceVersion,
		floor:        opts.InitialResourceVersion,
		objects:      map[key]*entry{},
		perNamespace: map[string]int{},
		watchers:     map[*watcher]struct{}{},
	}
	s.gc.init(opts.Collector)
	s.mu.Lock()
	for _, r := range opts.Restored {
		e := newEntry(r.Object, r.Raw)
		s.objects[keyOf(r.Resource, r.Object.GetNamespace(), r.Object.GetName())] = e
		if r.Resource.Namespaced {
			s.perNamespace[r.Object.GetNamespace()]++
		}
		s.lim.bytes += int64(len(e.raw))
	}
	// What a restart interrupted (a dependent whose owner went, an owner
	// deleted in the foreground or orphaning) is queued again.
	s.gcRestore(opts.Restored)
	// The store keeps them encoded: holding the decoded ones too would
	// undo what that saves.
	s.opts.Restored = nil
	s.mu.Unlock()
	for _, name := range opts.InitialNamespaces {
		ns := &unstructured.Unstructured{}
		ns.SetAPIVersion("v1")
		ns.SetKind("Namespace")
		ns.SetName(name)
		if _, err := s.Create(Namespaces, ns); err != nil {
			// Only a duplicate in InitialNamespaces gets here; it is already there.
			continue
		}
	}
	return s
}

// ResourceVersion is the store's current resourceVersion.
func (s *Store) ResourceVersion() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strconv.FormatUint(s.rv, 10)
}

func keyOf(res Resource, namespace, name string) key {
	if !res.Namespaced {
		namespace = ""
	}
	return key{group: res.Group, resource: res.Resource, namespace: namespace, name: name}
}

// Get returns a copy of the object, or 404 NotFound.
func (s *Store) Get(res Resource, namespace, name string) (*unstructured.Unstructured, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.objects[keyOf(res, namespace, name)]
	if !ok {
		return nil, apierrors.NewNotFound(res.GroupResource(), name)
	}
	return e.decode(), nil
}

// Create stores a new object and returns it as stored. A name is generated
// from metadata.generateName when metadata.name is empty.
func (s *Store) Create(res Resource, in *unstructured.Unstructured, opts ...WriteOption) (*unstructured.Unstructured, error) {
	wo := writeOptions(opts)
	obj := in.DeepCopy()
	if !res.Namespaced {
		obj.SetNamespace("")
	} else if obj.GetNamespace() == "" {
		return nil, apierrors.NewBadRequest("the namespace of the object must be set for a namespaced resource")
	}

	s.mu.Lock()
	defer s.mu.Unlock()

	if obj.GetName() == "" {
		if obj.GetGenerateName() == "" {
			return nil, apierrors.NewInvalid(obj.GroupVersionKind().GroupKind(), "", field.ErrorList{
				field.Required(field.NewPath("metadata", "name"), "name or generateName is required"),
			})
		}
		obj.SetName(s.generateName(res, obj.GetNamespace(), obj.GetGenerateName()))
	}
	if res.Namespaced {
		ns, ok := s.objects[keyOf(Namespaces, "", obj.GetNamespace())]
		if !ok {
			return nil, apierrors.NewNotFound(Namespaces.GroupResource(), obj.GetNamespace())
		}
		if ns.deleting {
			return nil, apierrors.NewForbidden(res.GroupResource(), obj.GetName(),
				fmt.Errorf("unable to create new content in namespace %s because it is being terminated", obj.GetNamespace()))
		}
	}
	k := keyOf(res, obj.GetNamespace(), obj.GetName())
	if _, exists := s.objects[k]; exists {
		return nil, apierrors.NewAlreadyExists(res.GroupResource(), obj.GetName())
	}
	if err := validateGCMeta(obj); err != nil {
		return nil, err
	}

	if res == Namespaces {
		// What kube-apiserver's namespace registry sets on every namespace.
		if phase, _, _ := unstructured.NestedString(obj.Object, "status", "phase"); phase == "" {
			_ = unstructured.SetNestedField(obj.Object, "Active", "status", "phase")
		}
		lbls := obj.GetLabels()
		if lbls == nil {
			lbls = map[string]string{}
		}
		lbls["kubernetes.io/metadata.name"] = obj.GetName()
		obj.SetLabels(lbls)
	}

	obj.SetUID(uuid.NewUUID())
	obj.SetCreationTimestamp(metav1.NewTime(s.opts.Now().Truncate(time.Second)))
	obj.SetGeneration(1)
	obj.SetDeletionTimestamp(nil)
	obj.SetDeletionGracePeriodSeconds(nil)
	obj.SetResourceVersion(strconv.FormatUint(s.rv+1, 10))
	raw, err := s.admitLocked(res, obj, nil)
	if err != nil {
		return nil, err
	}
	if wo.dryRun {
		// What would be stored, without the resourceVersion storing assigns.
		obj.SetResourceVersion("")
		return obj, nil
	}
	s.rv++
	e := newEntry(obj, raw)
	s.objects[k] = e
	if res.Namespaced {
		s.perNamespace[obj.GetNamespace()]++
	}
	s.emit(event{typ: watch.Added, res: res, namespace: k.namespace, cur: e, obj: obj, rv: s.rv})
	return obj.DeepCopy(), nil
}

const generatedSuffixChars = "bcdfghjklmnpqrstvwxz2456789"

// generateName picks a free name with the prefix, as kube-apiserver's
// five-character suffix does.
func (s *Store) generateName(res Resource, namespace, prefix string) string {
	for {
		b := make([]byte, 5)
		for i := range b {
			b[i] = generatedSuffixChars[rand.IntN(len(generatedSuffixChars))]
		}
		name := prefix + string(b)
		if _, taken := s.objects[keyOf(res, namespace, name)]; !taken {
			return name
		}
	}
}

// Update replaces an object. A non-empty metadata.resourceVersion must be
// the stored one (else 409 Conflict). uid, creationTimestamp and
// deletionTimestamp are kept from the stored object; generation is bumped
// when anything outside metadata and status changes. An object being
// deleted whose last finalizer the update removes is deleted.
func (s *Store) Update(res Resource, in *unstructured.Unstructured, opts ...WriteOption) (*unstructured.Unstructured, error) {
	wo := writeOptions(opts)
	obj := in.DeepCopy()
	if !res.Namespaced {
		obj.SetNamespace("")
	}

	s.mu.Lock()
	defer s.mu.Unlock()

	k := keyOf(res, obj.GetNamespace(), obj.GetName())
	oldEntry, ok := s.objects[k]
	if !ok {
		return nil, apierrors.NewNotFound(res.GroupResource(), obj.GetName())
	}
	old := oldEntry.decode()
	if rv := obj.GetResourceVersion(); rv != "" && rv != old.GetResourceVersion() {
		return nil, conflict(res, obj.GetName())
	}
	if old.GetDeletionTimestamp() != nil {
		oldFinalizers := old.GetFinalizers()
		for _, f := range obj.GetFinalizers() {
			if !slices.Contains(oldFinalizers, f) {
				return nil, apierrors.NewInvalid(obj.GroupVersionKind().GroupKind(), obj.GetName(), field.ErrorList{
					field.Forbidden(field.NewPath("metadata", "finalizers"), "no new finalizers can be added if the object is being deleted"),
				})
			}
		}
	}

	if err := validateGCMeta(obj); err != nil {
		return nil, err
	}
	obj.SetUID(old.GetUID())
	obj.SetCreationTimestamp(old.GetCreationTimestamp())
	obj.SetDeletionTimestamp(old.GetDeletionTimestamp())
	obj.SetDeletionGracePeriodSeconds(old.GetDeletionGracePeriodSeconds())
	obj.SetGeneration(old.GetGeneration())
	if !equality.Semantic.DeepEqual(withoutMetaAndStatus(old), withoutMetaAndStatus(obj)) {
		obj.SetGeneration(old.GetGeneration() + 1)
	}
	// An update that changes nothing is not a change: no new
	// resourceVersion and no event, as in kube-apiserver.
	obj.SetResourceVersion(old.GetResourceVersion())
	if equality.Semantic.DeepEqual(old.Object, obj.Object) {
		return obj, nil
	}
	obj.SetResourceVersion(strconv.FormatUint(s.rv+1, 10))
	raw, err := s.admitLocked(res, obj, oldEntry)
	if err != nil {
		return nil, err
	}
	if wo.dryRun {
		obj.SetResourceVersion(old.GetResourceVersion())
		return obj, nil
	}
	out, _, _ := s.replaceLocked(res, k, oldEntry, old, obj, raw)
	return out.DeepCopy(), nil
}

// replaceLocked stores obj in the place of the stored old (oldObj
// decoded) at the next resourceVersion; an object being deleted that
// nothing holds any more goes. raw is obj's encoding already made at that
// resourceVersion, or nil. It returns obj, its entry and whether it is
// gone.
func (s *Store) replaceLocked(res Resource, k key, old *entry, oldObj, obj *unstructured.Unstructured, raw []byte) (*unstructured.Unstructured, *entry, bool) {
	s.rv++
	if rv := strconv.FormatUint(s.rv, 10); obj.GetResourceVersion() != rv {
		obj.SetResourceVersion(rv)
		raw = nil
	}
	if obj.GetDeletionTimestamp() != nil && s.removable(res, obj) {
		s.remove(res, k, obj, old, oldObj)
		return obj, nil, true
	}
	e := newEntry(obj, raw)
	s.objects[k] = e
	s.emit(event{typ: watch.Modified, res: res, namespace: k.namespace, cur: e, old: old, obj: obj, prev: oldObj, rv: s.rv})
	return obj, e, false
}

func withoutMetaAndStatus(obj *unstructured.Unstructured) map[string]any {
	m := maps.Clone(obj.Object)
	delete(m, "metadata")
	delete(m, "status")
	delete(m, "apiVersion")
	delete(m, "kind")
	return m
}

func conflict(res Resource, name string) error {
	return apierrors.NewConflict(res.GroupResource(), name,
		fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again"))
}

// Preconditions must hold for a delete to proceed (409 Conflict otherwise).
type Preconditions struct {
	UID             types.UID
	ResourceVersion string
}

// Delete deletes an object. An object with finalizers is only marked
// (deletionTimestamp) and goes when its last finalizer is removed; a
// namespace is marked Terminating, its content deleted, and goes when it is
// empty. The Propagation option says what happens to its dependents (see
// gc.go); deleting again what is being deleted only changes its GC
// finalizer. It returns the object's last state and whether it is gone.
func (s *Store) Delete(res Resource, namespace, name string, pre Preconditions, opts ...WriteOption) (*unstructured.Unstructured, bool, error) {
	wo := writeOptions(opts)
	s.mu.Lock()
	defer s.mu.Unlock()

	k := keyOf(res, namespace, name)
	oldEntry, ok := s.objects[k]
	if !ok {
		return nil, false, apierrors.NewNotFound(res.GroupResource(), name)
	}
	old := oldEntry.decode()
	if pre.UID != "" && pre.UID != old.GetUID() {
		return nil, false, apierrors.NewConflict(res.GroupResource(), name,
			fmt.Errorf("precondition failed: UID in precondition: %s, UID in object meta: %s", pre.UID, old.GetUID()))
	}
	if pre.ResourceVersion != "" && pre.ResourceVersion != old.GetResourceVersion() {
		return nil, false, apierrors.NewConflict(res.GroupResource(), name,
			fmt.Errorf("precondition failed: ResourceVersion in precondition: %s, ResourceVersion in object meta: %s", pre.ResourceVersion, old.GetResourceVersion()))
	}
	if wo.dryRun {
		obj := old
		if fins, changed := gcFinalizers(obj.GetFinalizers(), wo.propagation); changed {
			obj.SetFinalizers(fins)
		}
		if obj.GetDeletionTimestamp() == nil || shortens(obj, wo.grace) {
			s.markDeleted(obj, wo.grace)
		}
		return obj, s.removable(res, obj) && res != Namespaces, nil
	}
	obj, gone := s.deleteLockedGrace(res, k, oldEntry, old, wo.propagation, wo.grace)
	return obj.DeepCopy(), gone, nil
}

// WriteOption changes how Create, Update and Delete write.
type WriteOption func(*writeOpts)

type writeOpts struct {
	dryRun      bool
	propagation *metav1.DeletionPropagation
	grace       *int64
}

// GracePeriod makes a Delete graceful, as kube-apiserver deletes a Pod
// bound to a Node: an object deleted with seconds > 0 is only marked
// (deletionTimestamp now + seconds, deletionGracePeriodSeconds) until a
// Delete with a shorter period, 0 removing it (its finalizers gone). A
// Delete without GracePeriod is immediate the first time and leaves the
// period of an object already being deleted as it is.
func GracePeriod(seconds int64) WriteOption {
	return func(o *writeOpts) { o.grace = &seconds }
}

// DryRun makes a write check and compute everything and store nothing
// (kube-apiserver's dryRun=All): no new resourceVersion, no event.
func DryRun() WriteOption {
	return func(o *writeOpts) { o.dryRun = true }
}

func writeOptions(opts []WriteOption) writeOpts {
	var o writeOpts
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// shortens says whether a grace period is shorter than the one the object
// is being deleted with.
func shortens(obj *unstructured.Unstructured, grace *int64) bool {
	if grace == nil {
		return false
	}
	cur := obj.GetDeletionGracePeriodSeconds()
	return cur == nil || *grace < *cur
}

// markDeleted sets the deletion timestamp and grace period, as
// kube-apiserver does: the timestamp is when the grace period ends.
func (s *Store) markDeleted(obj *unstructured.Unstructured, grace *int64) {
	seconds := int64(0)
	if grace != nil && *grace > 0 {
		seconds = *grace
	}
	at := metav1.NewTime(s.opts.Now().Truncate(time.Second).Add(time.Duration(seconds) * time.Second))
	obj.SetDeletionTimestamp(&at)
	obj.SetDeletionGracePeriodSeconds(&seconds)
}

// deleteLocked deletes (or marks) the stored object oldEntry, old
// decoded; policy nil keeps the GC finalizer it has. The object returned
// may be shared with watchers.
func (s *Store) deleteLocked(res Resource, k key, oldEntry *entry, old *unstructured.Unstructured, policy *metav1.DeletionPropagation) (*unstructured.Unstructured, bool) {
	return s.deleteLockedGrace(res, k, oldEntry, old, policy, nil)
}

// deleteLockedGrace is deleteLocked with a grace period (GracePeriod).
func (s *Store) deleteLockedGrace(res Resource, k key, oldEntry *entry, old *unstructured.Unstructured, policy *metav1.DeletionPropagation, grace *int64) (*unstructured.Unstructured, bool) {
	isNamespace := res == Namespaces
	finalizers, changed := gcFinalizers(old.GetFinalizers(), policy)
	if old.GetDeletionTimestamp() == nil {
		obj := old.DeepCopy()
		if changed {
			obj.SetFinalizers(finalizers)
		}
		s.markDeleted(obj, grace)
		if isNamespace {
			_ = unstructured.SetNestedField(obj.Object, "Terminating", "status", "phase")
		}
		s.rv++
		obj.SetResourceVersion(strconv.FormatUint(s.rv, 10))
		if s.removable(res, obj) && !isNamespace {
			s.remove(res, k, obj, oldEntry, old)
			return obj, true
		}
		e := newEntry(obj, nil)
		s.objects[k] = e
		s.emit(event{typ: watch.Modified, res: res, namespace: k.namespace, cur: e, old: oldEntry, obj: obj, prev: old, rv: s.rv})
		if isNamespace {
			s.deleteNamespaceContent(k.name)
			if cur, ok := s.objects[k]; ok {
				return cur.decode(), false
			}
			return obj, true
		}
		return obj, false
	}
	// Deleting again what is already being deleted changes only its GC
	// finalizer and shortens its grace period, as kube-apiserver's
	// registry does.
	if changed || shortens(old, grace) {
		obj := old.DeepCopy()
		obj.SetFinalizers(finalizers)
		if shortens(old, grace) {
			s.markDeleted(obj, grace)
		}
		out, _, gone := s.replaceLocked(res, k, oldEntry, old, obj, nil)
		return out, gone
	}
	return old, false
}

// deleteNamespaceContent deletes every object in the namespace, as the
// namespace controller does (propagationPolicy Background), then the
// namespace itself if nothing holds it.
func (s *Store) deleteNamespaceContent(namespace string) {
	var inside []key
	for k := range s.objects {
		if k.namespace == namespace {
			inside = append(inside, k)
		}
	}
	for _, k := range inside {
		res := Resource{Group: k.group, Resource: k.resource, Namespaced: true}
		if e, ok := s.objects[k]; ok {
			s.deleteLocked(res, k, e, e.decode(), ptrTo(metav1.DeletePropagationBackground))
		}
	}
	s.finishNamespace(namespace)
}

// removable says whether an object marked for deletion can go now.
func (s *Store) removable(res Resource, obj *unstructured.Unstructured) bool {
	if len(obj.GetFinalizers()) > 0 {
		return false
	}
	if g := obj.GetDeletionGracePeriodSeconds(); g != nil && *g > 0 {
		return false // its grace period is running (GracePeriod)
	}
	if res == Namespaces {
		return s.perNamespace[obj.GetName()] == 0
	}
	return true
}

// remove drops the object (already given its deletion resourceVersion),
// stored as old (oldObj decoded), and finishes a terminating namespace it
// was the last content of.
func (s *Store) remove(res Resource, k key, obj *unstructured.Unstructured, old *entry, oldObj *unstructured.Unstructured) {
	delete(s.objects, k)
	s.emit(event{typ: watch.Deleted, res: res, namespace: k.namespace, cur: newEntry(obj, nil), old: old, obj: obj, prev: oldObj, rv: s.rv})
	if res.Namespaced {
		s.perNamespace[k.namespace]--
		if s.perNamespace[k.namespace] <= 0 {
			delete(s.perNamespace, k.namespace)
			s.finishNamespace(k.namespace)
		}
	}
}

// finishNamespace removes a terminating namespace that has become empty and
// has no finalizers.
func (s *Store) finishNamespace(namespace string) {
	k := keyOf(Namespaces, "", namespace)
	e, ok := s.objects[k]
	if !ok || !e.deleting {
		return
	}
	ns := e.decode()
	if !s.removable(Namespaces, ns) {
		return
	}
	obj := ns.DeepCopy()
	s.rv++
	obj.SetResourceVersion(strconv.FormatUint(s.rv, 10))
	s.remove(Namespaces, k, obj, e, ns)
}

// ListOptions select what List returns.
type ListOptions struct {
	LabelSelector labels.Selector
	FieldSelector fields.Selector
	// ResourceVersion and ResourceVersionMatch as in metav1.ListOptions:
	// the store serves only its current state, so an Exact version other
	// than the current one is 410 Gone, and a version newer than the
	// store's is 504 with cause ResourceVersionTooLarge.
	ResourceVersion      string
	ResourceVersionMatch metav1.ResourceVersionMatch
}

// List returns copies of the matching objects, sorted by namespace and
// name, and the resourceVersion of the state they were read at. An empty
// namespace lists every namespace.
func (s *Store) List(res Resource, namespace string, opts ListOptions) ([]*unstructured.Unstructured, string, error) {
	if err := validateFieldSelector(res, opts.FieldSelector); err != nil {
		return nil, "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.listLocked(res, namespace, opts)
}

func (s *Store) listLocked(res Resource, namespace string, opts ListOptions) ([]*unstructured.Unstructured, string, error) {
	if err := s.checkListRV(opts); err != nil {
		return nil, "", err
	}

	var items []*unstructured.Unstructured
	for _, k := range s.matchingLocked(res, namespace, opts) {
		items = append(items, s.objects[k].decode())
	}
	return items, strconv.FormatUint(s.rv, 10), nil
}

// matchingLocked returns the keys of the objects that match, sorted by
// namespace and name, so that only what is served is decoded.
func (s *Store) matchingLocked(res Resource, namespace string, opts ListOptions) []key {
	w := &watcher{res: res, namespace: namespace, labels: opts.LabelSelector, fields: opts.FieldSelector}
	var keys []key
	for k, e := range s.objects {
		if k.group != res.Group || k.resource != res.Resource {
			continue
		}
		if ok, _ := w.matchesStored(k.namespace, e); ok {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, compareKeys)
	return keys
}

func compareKeys(a, b key) int {
	if c := strings.Compare(a.namespace, b.namespace); c != 0 {
		return c
	}
	return strings.Compare(a.name, b.name)
}

// checkListRV refuses a resourceVersion the store cannot list at.
func (s *Store) checkListRV(opts ListOptions) error {
	if opts.ResourceVersion != "" && opts.ResourceVersion != "0" {
		rv, err := parseRV(opts.ResourceVersion)
		if err != nil {
			return err
		}
		if rv > s.rv {
			return tooLarge(rv, s.rv)
		}
		if opts.ResourceVersionMatch == metav1.ResourceVersionMatchExact && rv != s.rv {
			return apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", rv, s.rv))
		}
	}
	return nil
}

func parseRV(v string) (uint64, error) {
	rv, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, apierrors.NewBadRequest(fmt.Sprintf("invalid resource version %q: %v", v, err))
	}
	return rv, nil
}

// tooLarge is kube-apiserver's answer to a resourceVersion it has not
// reached; client-go recognises it by its cause.
func tooLarge(rv, current uint64) error {
	err := apierrors.NewTimeoutError(fmt.Sprintf("Too large resource version: %d, current: %d", rv, current), 1)
	err.ErrStatus.Details.Causes = []metav1.StatusCause{{
		Type:    metav1.CauseTypeResourceVersionTooLarge,
		Message: "Too large resource version",
	}}
	return err
}

// emit records a change in the journal and the history, and hands it to
// the watchers.
func (s *Store) emit(e event) {
	s.limitsObserve(e)
	s.gcObserve(e)
	if j := s.opts.Journal; j != nil {
		if e.typ == watch.Deleted {
			j.Delete(e.res, e.obj.GetNamespace(), e.obj.GetName(), e.rv)
		} else {
			j.Put(e.res, e.obj, e.cur.raw, e.rv)
		}
	}
	e.at = s.opts.Now()
	s.trimHistoryLocked(e.at)
	kept := e
	kept.obj, kept.prev = nil, nil
	if len(s.history) < s.opts.HistorySize {
		s.history = append(s.history, kept)
	} else {
		s.floor = s.history[s.histStart].rv
		s.history[s.histStart] = kept
		s.histStart = (s.histStart + 1) % len(s.history)
	}
	for w := range s.watchers {
		w.push(e)
	}
	s.notify(e)
}

// trimHistoryLocked drops the changes older than Options.HistoryAge. It
// runs on every change and on every bookmark sent: a quiet cluster is
// trimmed when its informers get their bookmarks, and no store needs a
// timer of its own. The ring is laid out again from its start, once per
// change or bookmark that finds something to drop.
func (s *Store) trimHistoryLocked(now time.Time) {
	if len(s.history) == 0 || !s.history[s.histStart].at.Before(now.Add(-s.opts.HistoryAge)) {
		return
	}
	cutoff := now.Add(-s.opts.HistoryAge)
	var kept []event
	for i := range s.history {
		e := s.history[(s.histStart+i)%len(s.history)]
		if e.at.Before(cutoff) {
			// Every change after this one is still in the history.
			s.floor = e.rv
			continue
		}
		kept = append(kept, e)
	}
	s.history, s.histStart = kept, 0
}

// newExpired is what a watch from a resourceVersion older than the history
// gets: kube-apiserver's 410 Gone with reason Expired.
func newExpired(rv, floor uint64) error {
	return apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", rv, floor+1))
}

// Close ends every watch of the store, and refuses new ones (503), for a
// cluster that is going away; reads and writes still work.
func (s *Store) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for w := range s.watchers {
		w.Stop()
	}
}
