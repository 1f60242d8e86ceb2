package store

import (
	"encoding/json"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kjson "sigs.k8s.io/json"
)

// entry is a stored object: its JSON, which takes a quarter to a third of
// the memory of the decoded maps, and the few fields that lookups read
// without decoding it (selecting by label, resolving owner references).
// An entry is never modified: the history shares it with the objects.
type entry struct {
	raw    []byte
	labels labelList
	gk     *groupKind
	// gc is the object's GC finalizer when it is being deleted ("" when
	// not, or without one); deleting says it is being deleted.
	gc       string
	deleting bool
}

type groupKind struct{ group, kind string }

// groupKinds holds one copy of every group and kind any store stored, as
// groupResources does for resources.
var groupKinds = struct {
	sync.Mutex
	m map[groupKind]*groupKind
}{m: map[groupKind]*groupKind{}}

func internGroupKind(group, kind string) *groupKind {
	groupKinds.Lock()
	defer groupKinds.Unlock()
	gk := groupKinds.m[groupKind{group, kind}]
	if gk == nil {
		gk = &groupKind{group, kind}
		groupKinds.m[*gk] = gk
	}
	return gk
}

// encode is the object's compact JSON, which is what the store keeps and
// what its size limits count.
func encode(obj *unstructured.Unstructured) []byte {
	raw, err := json.Marshal(obj.Object)
	if err != nil {
		// Unstructured content is JSON values (DeepCopy refuses others).
		panic(fmt.Sprintf("store: encoding %s %s/%s: %v", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err))
	}
	return raw
}

// newEntry keeps obj, whose encoding is raw (nil: encode it).
func newEntry(obj *unstructured.Unstructured, raw []byte) *entry {
	if raw == nil {
		raw = encode(obj)
	}
	e := &entry{raw: raw, gk: internGroupKind(groupOf(obj.GetAPIVersion()), obj.GetKind())}
	if l := obj.GetLabels(); len(l) > 0 {
		e.labels = make(labelList, 0, 2*len(l))
		for k, v := range l {
			e.labels = append(e.labels, k, v)
		}
	}
	if obj.GetDeletionTimestamp() != nil {
		e.deleting = true
		e.gc = gcFinalizer(obj.GetFinalizers())
	}
	return e
}

// decode returns a new decoded copy of the entry's object: integers come
// back as int64, as they do from a request body.
func (e *entry) decode() *unstructured.Unstructured {
	var m map[string]any
	if err := kjson.UnmarshalCaseSensitivePreserveInts(e.raw, &m); err != nil {
		panic(fmt.Sprintf("store: decoding a stored object: %v", err))
	}
	return &unstructured.Unstructured{Object: m}
}

// deletingDependents says whether the object is being deleted in the
// foreground; e may be nil.
func (e *entry) deletingDependents() bool {
	return e != nil && e.deleting && e.gc == finalizerForeground
}

// labelList is an object's labels as key, value pairs: a slice costs less
// than a map for the handful of labels an object has.
type labelList []string

func (l labelList) Lookup(label string) (string, bool) {
	for i := 0; i+1 < len(l); i += 2 {
		if l[i] == label {
			return l[i+1], true
		}
	}
	return "", false
}

func (l labelList) Has(label string) bool {
	_, ok := l.Lookup(label)
	return ok
}

func (l labelList) Get(label string) string {
	v, _ := l.Lookup(label)
	return v
}
