package store

import (
	"context"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"
)

// InitialEventsEndAnnotation marks the bookmark that ends the initial events
// of a watch with sendInitialEvents (client-go's watch-list, on by default
// since client-go v0.35, waits for it).
const InitialEventsEndAnnotation = metav1.InitialEventsAnnotationKey

// WatchOptions select what a watch delivers, as metav1.ListOptions do.
type WatchOptions struct {
	LabelSelector labels.Selector
	FieldSelector fields.Selector
	// ResourceVersion: "" or "0" start with the current state as ADDED
	// events; any other version delivers the changes after it, or 410 Gone
	// when those have left the history.
	ResourceVersion string
	// SendInitialEvents, when set, overrides what ResourceVersion says about
	// initial events: true sends the current state as ADDED events (ended
	// by a bookmark annotated k8s.io/initial-events-end when bookmarks are
	// allowed), false sends none and watches from the current version.
	SendInitialEvents *bool
	// AllowBookmarks asks for BOOKMARK events carrying the latest
	// resourceVersion every Options.BookmarkInterval.
	AllowBookmarks bool
}

// Watch starts a watch of one resource in a namespace (all when empty). The
// objects it delivers are shared with the store: read, never modify. Its
// events are handed over by a goroutine of its own; OpenStream delivers
// them on the caller's.
func (s *Store) Watch(res Resource, namespace string, opts WatchOptions) (watch.Interface, error) {
	w, err := s.openWatch(res, namespace, opts)
	if err != nil {
		return nil, err
	}
	w.result = make(chan watch.Event)
	go func() {
		defer close(w.result)
		w.run(w.done, func(e watch.Event) bool {
			select {
			case w.result <- e:
				return true
			case <-w.done:
				return false
			}
		})
	}()
	return w, nil
}

// Stream is a watch whose events the caller delivers on its own goroutine
// (Run): what Watch is, without the goroutine that hands them over, for a
// server that writes each event to its client as it comes.
type Stream struct{ w *watcher }

// OpenStream starts a watch as Watch does (same options, same errors); its
// events wait, bounded as Watch's, until Run delivers them. Run or Stop
// must follow.
func (s *Store) OpenStream(res Resource, namespace string, opts WatchOptions) (*Stream, error) {
	w, err := s.openWatch(res, namespace, opts)
	if err != nil {
		return nil, err
	}
	return &Stream{w: w}, nil
}

// Run hands every event to deliver, in order, until ctx ends, deliver
// fails, Stop is called or the store ends the watch (it fell
// WatchQueueSize events behind, or the store closed); then the watch is
// over. The objects are shared with the store: read, never modify.
func (st *Stream) Run(ctx context.Context, deliver func(watch.Event) error) {
	st.w.run(ctx.Done(), func(e watch.Event) bool { return deliver(e) == nil })
}

// Stop ends the watch: Run returns, and a Run not started yet returns at
// once.
func (st *Stream) Stop() {
	st.w.Stop()
	// Without a Run, nothing else unregisters it.
	st.w.unregister()
}

func (s *Store) openWatch(res Resource, namespace string, opts WatchOptions) (*watcher, error) {
	if err := validateFieldSelector(res, opts.FieldSelector); err != nil {
		return nil, err
	}
	w := &watcher{
		store:     s,
		res:       res,
		namespace: namespace,
		labels:    opts.LabelSelector,
		fields:    opts.FieldSelector,
		bookmarks: opts.AllowBookmarks,
		limit:     s.opts.WatchQueueSize,
		wake:      make(chan struct{}, 1),
		done:      make(chan struct{}),
	}

	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, apierrors.NewServiceUnavailable("the cluster is going away")
	}
	if err := s.admitWatchLocked(); err != nil {
		s.mu.Unlock()
		return nil, err
	}
	initial := opts.ResourceVersion == "" || opts.ResourceVersion == "0"
	since := s.rv
	if !initial {
		rv, err := parseRV(opts.ResourceVersion)
		if err != nil {
			s.mu.Unlock()
			return nil, err
		}
		if rv > s.rv {
			s.mu.Unlock()
			return nil, tooLarge(rv, s.rv)
		}
		since = rv
	}
	if opts.SendInitialEvents != nil {
		initial = *opts.SendInitialEvents
	}
	switch {
	case initial:
		// The current state stands for every change up to now.
		for k, e := range s.objects {
			if k.group != res.Group || k.resource != res.Resource {
				continue
			}
			if ok, obj := w.matchesStored(k.namespace, e); ok {
				if obj == nil {
					obj = e.decode()
				}
				w.queue = append(w.queue, watch.Event{Type: watch.Added, Object: obj})
			}
		}
		if opts.SendInitialEvents != nil && opts.AllowBookmarks {
			w.queue = append(w.queue, watch.Event{Type: watch.Bookmark, Object: bookmark(s.rv, true)})
		}
	case since < s.floor:
		s.mu.Unlock()
		return nil, newExpired(since, s.floor)
	default:
		for i := range s.history {
			e := s.history[(s.histStart+i)%len(s.history)]
			if e.rv > since {
				w.queueEvent(e)
			}
		}
	}
	// Initial events and the replayed history do not count against the queue limit.
	w.limit += len(w.queue)
	s.watchers[w] = struct{}{}
	s.mu.Unlock()
	return w, nil
}

func bookmark(rv uint64, initialEventsEnd bool) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{Object: map[string]any{}}
	obj.SetResourceVersion(strconv.FormatUint(rv, 10))
	if initialEventsEnd {
		obj.SetAnnotations(map[string]string{InitialEventsEndAnnotation: "true"})
	}
	return obj
}

// watcher is one watch: events are queued under the store's lock (so they
// are in resourceVersion order with nothing missed) and handed to the
// client by run, on the goroutine of Watch or of Stream.Run.
type watcher struct {
	store     *Store
	res       Resource
	namespace string
	labels    labels.Selector
	fields    fields.Selector
	bookmarks bool
	limit     int

	mu       sync.Mutex
	queue    []watch.Event
	overflow bool

	wake chan struct{}
	// result is Watch's channel; nil for a Stream.
	result   chan watch.Event
	done     chan struct{}
	stopOnce sync.Once
}

var _ watch.Interface = &watcher{}

func (w *watcher) matches(obj *unstructured.Unstructured) bool {
	if w.namespace != "" && obj.GetNamespace() != w.namespace {
		return false
	}
	if w.labels != nil && !w.labels.Matches(labels.Set(obj.GetLabels())) {
		return false
	}
	if w.fields != nil && !w.fields.Matches(fieldSet(w.res, obj)) {
		return false
	}
	return true
}

// matchesStored is matches for a stored object in namespace, decoding it
// only for a field selector; it returns the object when it decoded it.
func (w *watcher) matchesStored(namespace string, e *entry) (bool, *unstructured.Unstructured) {
	if w.namespace != "" && namespace != w.namespace {
		return false, nil
	}
	if w.labels != nil && !w.labels.Matches(e.labels) {
		return false, nil
	}
	if w.fields != nil {
		obj := e.decode()
		return w.fields.Matches(fieldSet(w.res, obj)), obj
	}
	return true, nil
}

// queueEvent turns a change into what this watcher sees: an object that
// starts matching the selectors is ADDED, one that stops matching is
// DELETED, as in kube-apiserver. A live change carries its objects
// decoded; one replayed from the history is decoded for this watcher.
func (w *watcher) queueEvent(e event) {
	if e.res.Group != w.res.Group || e.res.Resource != w.res.Resource {
		return
	}
	var now, before bool
	obj := e.obj
	if obj != nil {
		now = w.matches(obj)
		before = e.prev != nil && w.matches(e.prev)
	} else {
		now, obj = w.matchesStored(e.namespace, e.cur)
		before = e.old != nil
		if before {
			before, _ = w.matchesStored(e.namespace, e.old)
		}
	}
	var typ watch.EventType
	switch {
	case e.typ == watch.Deleted:
		if !before && !now {
			return
		}
		typ = watch.Deleted
	case now && before:
		typ = watch.Modified
	case now:
		typ = watch.Added
	case before:
		typ = watch.Deleted
	default:
		return
	}
	if obj == nil {
		obj = e.cur.decode()
	}
	w.queue = append(w.queue, watch.Event{Type: typ, Object: obj})
}

// push queues a live change; called with the store's lock held. A watcher
// that has fallen WatchQueueSize events behind is ended (after what it has
// queued) so the client resumes from its last resourceVersion.
func (w *watcher) push(e event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.overflow {
		return
	}
	if len(w.queue) >= w.limit {
		w.overflow = true
	} else {
		w.queueEvent(e)
	}
	w.signal()
}

func (w *watcher) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *watcher) pushBookmark() {
	w.store.mu.Lock()
	defer w.store.mu.Unlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.overflow {
		return
	}
	w.store.trimHistoryLocked(w.store.opts.Now())
	w.queue = append(w.queue, watch.Event{Type: watch.Bookmark, Object: bookmark(w.store.rv, false)})
	w.signal()
}

// run hands the queued events to deliver until stop or w.done is closed,
// deliver returns false, or the watch overflowed; then it unregisters the
// watcher.
func (w *watcher) run(stop <-chan struct{}, deliver func(watch.Event) bool) {
	defer w.unregister()
	var tick <-chan time.Time
	if w.bookmarks {
		t := time.NewTicker(w.store.opts.BookmarkInterval)
		defer t.Stop()
		tick = t.C
	}
	for {
		w.mu.Lock()
		batch := w.queue
		w.queue = nil
		w.limit = w.store.opts.WatchQueueSize
		overflow := w.overflow
		w.mu.Unlock()
		for _, e := range batch {
			select {
			case <-w.done:
				return
			case <-stop:
				return
			default:
			}
			if !deliver(e) {
				return
			}
		}
		if len(batch) > 0 {
			continue
		}
		if overflow {
			return
		}
		select {
		case <-w.wake:
		case <-tick:
			w.pushBookmark()
		case <-w.done:
			return
		case <-stop:
			return
		}
	}
}

func (w *watcher) unregister() {
	w.store.mu.Lock()
	delete(w.store.watchers, w)
	w.store.mu.Unlock()
}

// Stop ends the watch; the result channel is closed.
func (w *watcher) Stop() {
	w.stopOnce.Do(func() { close(w.done) })
}

// ResultChan delivers the events; it is closed when the watch ends.
func (w *watcher) ResultChan() <-chan watch.Event {
	return w.result
}
