package store

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
)

// Change is one change of a stored object, as an Observer sees it.
type Change struct {
	Type     watch.EventType // Added, Modified or Deleted
	Resource Resource
	// Object is the object after the change (for Deleted, its last state);
	// Previous is the one before (nil for Added). Both are shared with the
	// store: read, never modify, and do not keep them past the call.
	Object, Previous *unstructured.Unstructured
}

// Observer is called with every change, in resourceVersion order, under
// the store's lock: it must return quickly and must not call the store
// (it queues work for later). Unlike a watch it costs no goroutine and no
// queue, which is what in-process controllers of many clusters need.
type Observer func(Change)

type observer struct{ fn Observer }

// Observe calls fn with every change from now on, until stop is called.
func (s *Store) Observe(fn Observer) (stop func()) {
	o := &observer{fn: fn}
	s.mu.Lock()
	if s.observers == nil {
		s.observers = map[*observer]struct{}{}
	}
	s.observers[o] = struct{}{}
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		delete(s.observers, o)
		s.mu.Unlock()
	}
}

// notify hands a change to the observers; s.mu is held.
func (s *Store) notify(e event) {
	for o := range s.observers {
		o.fn(Change{Type: e.typ, Resource: e.res, Object: e.obj, Previous: e.prev})
	}
}
