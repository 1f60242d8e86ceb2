package store

import (
	"strconv"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
)

var (
	pods       = Resource{Resource: "pods", Namespaced: true}
	nodes      = Resource{Resource: "nodes"}
	configMaps = Resource{Resource: "configmaps", Namespaced: true}
)

func pod(ns, name, node string, lbls map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"spec": map[string]any{"nodeName": node},
	}}
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetLabels(lbls)
	return u
}

func node(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Node", "spec": map[string]any{}}}
	u.SetName(name)
	return u
}

func rvOf(g Gomega, obj *unstructured.Unstructured) uint64 {
	rv, err := strconv.ParseUint(obj.GetResourceVersion(), 10, 64)
	g.Expect(err).NotTo(HaveOccurred())
	return rv
}

func TestCreateSetsIdentityAndVersionsIncrease(t *testing.T) {
	g := NewWithT(t)
	s := New(Options{})
	a, err := s.Create(nodes, node("a"))
	g.Expect(err).NotTo(HaveOccurred())
	b, err := s.Create(nodes, node("b"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(a.GetUID()).NotTo(BeEmpty())
	g.Expect(a.GetUID()).NotTo(Equal(b.GetUID()))
	ts := a.GetCreationTimestamp()
	g.Expect(ts.IsZero()).To(BeFalse())
	g.Expect(a.GetGeneration()).To(Equal(int64(1)))
	g.Expect(rvOf(g, b)).To(BeNumerically(">", rvOf(g, a)))
	g.Expect(s.ResourceVersion()).To(Equal(b.GetResourceVersion()))

	_, err = s.Create(nodes, node("a"))
	g.Expect(apierrors.IsAlreadyExists(err)).To(BeTrue(), "got %v", err)

	gen := node("")
	gen.SetGenerateName("worker-")
	made, err := s.Create(nodes, gen)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(made.GetName()).To(HavePrefix("worker-"))
	g.Expect(made.GetName()).To(HaveLen(len("worker-") + 5))

	_, err = s.Create(nodes, node(""))
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
}

func TestNamespacedCreateNeedsAnExistingNamespace(t *testing.T) {
	g := NewWithT(t)
	s := New(Options{})
	_, err := s.Create(pods, pod("missing", "p", "", nil))
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "got %v", err)
	g.Expect(err.(apierrors.APIStatus).Status().Details.Kind).To(Equal("namespaces"))

	_, err = s.Create(pods, pod("kube-system", "p", "", nil))
	g.Expect(err).NotTo(HaveOccurred())
}

func TestUpdateChecksResourceVersionAndBumpsGenerationOnSpecChanges(t *testing.T) {
	g := NewWithT(t)
	s := New(Options{})
	n, err := s.Create(nodes, node("n"))
	g.Expect(err).NotTo(HaveOccurred())

	// A label is metadata: no generation bump.
	labelled := n.DeepCopy()
	labelled.SetLabels(map[string]string{"a": "b"})
	labelled, err = s.Update(nodes, labelled)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(labelled.GetGeneration()).To(Equal(int64(1)))
	g.Expect(rvOf(g, labelled)).To(BeNumerically(">", rvOf(g, n)))

	// Status is not spec: no bump either.
	withStatus := labelled.DeepCopy()
	g.Expect(unstructured.SetNestedField(withStatus.Object, "x", "status", "phase")).To(Succeed())
	withStatus, err = s.Update(nodes, withStatus)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(withStatus.GetGeneration()).To(Equal(int64(1)))

	spec := withStatus.DeepCopy()
	g.Expect(unstructured.SetNestedField(spec.Object, true, "spec", "unschedulable")).To(Succeed())
	spec, err = s.Update(nodes, spec)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(spec.GetGeneration()).To(Equal(int64(2)))
	g.Expect(spec.GetUID()).To(Equal(n.GetUID()))

	// The first copy is stale now.
	stale := n.DeepCopy()
	stale.SetLabels(map[string]string{"stale": "yes"})
	_, err = s.Update(nodes, stale)
	g.Expect(apierrors.IsConflict(err)).To(BeTrue(), "got %v", err)

	// An update that changes nothing makes no new version.
	same, err := s.Update(nodes, spec)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(same.GetResourceVersion()).To(Equal(spec.GetResourceVersion()))

	_, err = s.Update(nodes, node("absent"))
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "got %v", err)
}

func TestDeleteHonoursFinalizers(t *testing.T) {
	g := NewWithT(t)
	s := New(Options{})
	p := pod("default", "p", "", nil)
	p.SetFinalizers([]string{"example.com/hold"})
	created, err := s.Create(pods, p)
	g.Expect(err).NotTo(HaveOccurred())

	_, _, err = s.Delete(pods, "default", "p", Preconditions{UID: "other"})
	g.Expect(apierrors.IsConflict(err)).To(BeTrue(), "got %v", err)

	marked, gone, err := s.Delete(pods, "default", "p", Preconditions{UID: created.GetUID()})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(gone).To(BeFalse())
	g.Expect(marked.GetDeletionTimestamp()).NotTo(BeNil())

	got, err := s.Get(pods, "default", "p")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.GetDeletionTimestamp()).NotTo(BeNil())

	added := got.DeepCopy()
	added.SetFinalizers([]string{"example.com/hold", "example.com/new"})
	_, err = s.Update(pods, added)
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)

	got.SetFinalizers(nil)
	_, err = s.Update(pods, got)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = s.Get(pods, "default", "p")
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "got %v", err)

	_, gone, err = s.Delete(nodes, "", "absent", Preconditions{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "got %v", err)
	g.Expect(gone).To(BeFalse())
}

func TestNamespaceDeletionDeletesItsContentAndWaitsForFinalizers(t *testing.T) {
	g := NewWithT(t)
	s := New(Options{})
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace"}}
	ns.SetName("team")
	_, err := s.Create(Namespaces, ns)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = s.Create(configMaps, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "plain", "namespace": "team"},
	}})
	g.Expect(err).NotTo(HaveOccurred())
	held := pod("team", "held", "", nil)
	held.SetFinalizers([]string{"example.com/hold"})
	_, err = s.Create(pods, held)
	g.Expect(err).NotTo(HaveOccurred())

	_, gone, err := s.Delete(Namespaces, "", "team", Preconditions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(gone).To(BeFalse())

	_, err = s.Get(configMaps, "team", "plain")
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "got %v", err)
	terminating, err := s.Get(Namespaces, "", "team")
	g.Expect(err).NotTo(HaveOccurred())
	phase, _, _ := unstructured.NestedString(terminating.Object, "status", "phase")
	g.Expect(phase).To(Equal("Terminating"))

	_, err = s.Create(pods, pod("team", "late", "", nil))
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "got %v", err)

	p, err := s.Get(pods, "team", "held")
	g.Expect(err).NotTo(HaveOccurred())
	p.SetFinalizers(nil)
	_, err = s.Update(pods, p)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = s.Get(Namespaces, "", "team")
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the namespace goes with its last object, got %v", err)
}

func TestListSelectsByLabelsAndFields(t *testing.T) {
	g := NewWithT(t)
	s := New(Options{})
	for _, p := range []*unstructured.Unstructured{
		pod("default", "a", "n1", map[string]string{"app": "web"}),
		pod("default", "b", "n2", map[string]string{"app": "web"}),
		pod("kube-system", "c", "n1", map[string]string{"app": "dns"}),
	} {
		_, err := s.Create(pods, p)
		g.Expect(err).NotTo(HaveOccurred())
	}
	names := func(items []*unstructured.Unstructured) []string {
		var out []string
		for _, i := range items {
			out = append(out, i.GetNamespace()+"/"+i.GetName())
		}
		return out
	}

	all, rv, err := s.List(pods, "", ListOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(names(all)).To(Equal([]string{"default/a", "default/b", "kube-system/c"}))
	g.Expect(rv).To(Equal(s.ResourceVersion()))

	web, _, err := s.List(pods, "", ListOptions{LabelSelector: labels.SelectorFromSet(labels.Set{"app": "web"})})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(names(web)).To(Equal([]string{"default/a", "default/b"}))

	onN1, _, err := s.List(pods, "", ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", "n1")})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(names(onN1)).To(Equal([]string{"default/a", "kube-system/c"}))

	inDefault, _, err := s.List(pods, "default", ListOptions{FieldSelector: fields.OneTermNotEqualSelector("metadata.name", "a")})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(names(inDefault)).To(Equal([]string{"default/b"}))

	_, _, err = s.List(pods, "", ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nope", "x")})
	g.Expect(apierrors.IsBadRequest(err)).To(BeTrue(), "got %v", err)

	_, _, err = s.List(pods, "", ListOptions{ResourceVersion: "99999999999999999"})
	g.Expect(apierrors.IsTimeout(err)).To(BeTrue(), "a future version is too large, got %v", err)
}

func next(g Gomega, w watch.Interface) watch.Event {
	var e watch.Event
	g.Eventually(w.ResultChan(), 5*time.Second).Should(Receive(&e))
	return e
}

// nextChange is the watch's next event that is not a bookmark.
func nextChange(g Gomega, w watch.Interface) watch.Event {
	for {
		if e := next(g, w); e.Type != watch.Bookmark {
			return e
		}
	}
}

func TestWatchResumesFromAResourceVersionAndExpiresOldOnes(t *testing.T) {
	g := NewWithT(t)
	s := New(Options{HistorySize: 4})
	first, err := s.Create(nodes, node("n0"))
	g.Expect(err).NotTo(HaveOccurred())
	for i := 1; i <= 2; i++ {
		_, err := s.Create(nodes, node("n"+strconv.Itoa(i)))
		g.Expect(err).NotTo(HaveOccurred())
	}

	w, err := s.Watch(nodes, "", WatchOptions{ResourceVersion: first.GetResourceVersion()})
	g.Expect(err).NotTo(HaveOccurred())
	defer w.Stop()
	for _, name := range []string{"n1", "n2"} {
		e := next(g, w)
		g.Expect(e.Type).To(Equal(watch.Added))
		g.Expect(e.Object.(*unstructured.Unstructured).GetName()).To(Equal(name))
	}
	_, _, err = s.Delete(nodes, "", "n1", Preconditions{})
	g.Expect(err).NotTo(HaveOccurred())
	e := next(g, w)
	g.Expect(e.Type).To(Equal(watch.Deleted))
	g.Expect(e.Object.(*unstructured.Unstructured).GetName()).To(Equal("n1"))

	// Four more changes push the first ones out of the four-long history.
	for i := 3; i <= 6; i++ {
		_, err := s.Create(nodes, node("n"+strconv.Itoa(i)))
		g.Expect(err).NotTo(HaveOccurred())
	}
	_, err = s.Watch(nodes, "", WatchOptions{ResourceVersion: first.GetResourceVersion()})
	g.Expect(apierrors.IsResourceExpired(err)).To(BeTrue(), "got %v", err)
	g.Expect(err.(apierrors.APIStatus).Status().Code).To(Equal(int32(410)))
}

// Changes older than HistoryAge leave the history, on the next change or
// on a bookmark: a watch from before them gets 410 Gone, one from after them
// still replays what followed, and an informer's last bookmark stays valid.
func TestHistoryKeepsChangesForHistoryAge(t *testing.T) {
	g := NewWithT(t)
	var mu sync.Mutex
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }
	s := New(Options{HistoryAge: time.Minute, BookmarkInterval: 20 * time.Millisecond, Now: clock})

	old, err := s.Create(nodes, node("old"))
	g.Expect(err).NotTo(HaveOccurred())
	informer, err := s.Watch(nodes, "", WatchOptions{ResourceVersion: old.GetResourceVersion(), AllowBookmarks: true})
	g.Expect(err).NotTo(HaveOccurred())
	defer informer.Stop()
	advance(50 * time.Second)
	recent, err := s.Create(nodes, node("recent"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(nextChange(g, informer).Object.(*unstructured.Unstructured).GetName()).To(Equal("recent"))

	// "old" is 70 s old, "recent" 20 s: the next change drops "old" only.
	advance(20 * time.Second)
	_, err = s.Create(nodes, node("new"))
	g.Expect(err).NotTo(HaveOccurred())
	_, err = s.Watch(nodes, "", WatchOptions{ResourceVersion: strconv.FormatUint(rvOf(g, old)-1, 10)})
	g.Expect(apierrors.IsResourceExpired(err)).To(BeTrue(), "a watch from before the dropped change: got %v", err)
	w, err := s.Watch(nodes, "", WatchOptions{ResourceVersion: old.GetResourceVersion()})
	g.Expect(err).NotTo(HaveOccurred(), "every change after the dropped one is still there")
	for _, name := range []string{"recent", "new"} {
		g.Expect(next(g, w).Object.(*unstructured.Unstructured).GetName()).To(Equal(name))
	}
	w.Stop()

	// A quiet cluster: nothing changes, and a bookmark trims the rest.
	advance(2 * time.Minute)
	var last string
	g.Eventually(func(g Gomega) {
		e := next(g, informer)
		g.Expect(e.Type).To(Equal(watch.Bookmark))
		last = e.Object.(*unstructured.Unstructured).GetResourceVersion()
		_, err := s.Watch(nodes, "", WatchOptions{ResourceVersion: recent.GetResourceVersion()})
		g.Expect(apierrors.IsResourceExpired(err)).To(BeTrue(), "got %v", err)
	}, 5*time.Second).Should(Succeed())
	s.mu.Lock()
	g.Expect(s.history).To(BeEmpty(), "no replaced versions are held")
	s.mu.Unlock()
	resumed, err := s.Watch(nodes, "", WatchOptions{ResourceVersion: last})
	g.Expect(err).NotTo(HaveOccurred(), "an informer resumes from its last bookmark")
	defer resumed.Stop()
	_, err = s.Create(nodes, node("after"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(next(g, resumed).Object.(*unstructured.Unstructured).GetName()).To(Equal("after"))
}

func TestWatchSeesObjectsEnterAndLeaveItsSelector(t *testing.T) {
	g := NewWithT(t)
	s := New(Options{})
	w, err := s.Watch(pods, "default", WatchOptions{
		LabelSelector:     labels.SelectorFromSet(labels.Set{"app": "web"}),
		SendInitialEvents: ptr.To(false),
	})
	g.Expect(err).NotTo(HaveOccurred())
	defer w.Stop()

	p, err := s.Create(pods, pod("default", "p", "", nil))
	g.Expect(err).NotTo(HaveOccurred())
	_, err = s.Create(pods, pod("kube-system", "other", "", map[string]string{"app": "web"}))
	g.Expect(err).NotTo(HaveOccurred())
	p.SetLabels(map[string]string{"app": "web"})
	p, err = s.Update(pods, p)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(next(g, w).Type).To(Equal(watch.Added))
	p.SetLabels(map[string]string{"app": "db"})
	_, err = s.Update(pods, p)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(next(g, w).Type).To(Equal(watch.Deleted))
	g.Consistently(w.ResultChan(), 100*time.Millisecond).ShouldNot(Receive())
}

func TestWatchWithInitialEventsEndsThemWithABookmark(t *testing.T) {
	g := NewWithT(t)
	s := New(Options{BookmarkInterval: 50 * time.Millisecond})
	_, err := s.Create(nodes, node("a"))
	g.Expect(err).NotTo(HaveOccurred())
	w, err := s.Watch(nodes, "", WatchOptions{SendInitialEvents: ptr.To(true), AllowBookmarks: true})
	g.Expect(err).NotTo(HaveOccurred())
	defer w.Stop()
	g.Expect(next(g, w).Type).To(Equal(watch.Added))
	end := next(g, w)
	g.Expect(end.Type).To(Equal(watch.Bookmark))
	obj := end.Object.(*unstructured.Unstructured)
	g.Expect(obj.GetAnnotations()).To(HaveKeyWithValue(InitialEventsEndAnnotation, "true"))
	g.Expect(obj.GetResourceVersion()).To(Equal(s.ResourceVersion()))

	// Then periodic bookmarks with the latest version.
	_, err = s.Create(nodes, node("b"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(next(g, w).Type).To(Equal(watch.Added))
	periodic := next(g, w)
	g.Expect(periodic.Type).To(Equal(watch.Bookmark))
	g.Expect(periodic.Object.(*unstructured.Unstructured).GetResourceVersion()).To(Equal(s.ResourceVersion()))
}

func TestASlowWatcherIsEndedAndCanResume(t *testing.T) {
	g := NewWithT(t)
	s := New(Options{WatchQueueSize: 2, HistorySize: 100})
	w, err := s.Watch(nodes, "", WatchOptions{SendInitialEvents: ptr.To(false)})
	g.Expect(err).NotTo(HaveOccurred())
	defer w.Stop()
	for i := range 10 {
		_, err := s.Create(nodes, node("n"+strconv.Itoa(i)))
		g.Expect(err).NotTo(HaveOccurred())
	}
	// The watcher got its two queued events, then was ended.
	seen := map[string]bool{}
	var last string
	g.Eventually(func(g Gomega) {
		for e := range w.ResultChan() {
			obj := e.Object.(*unstructured.Unstructured)
			seen[obj.GetName()] = true
			last = obj.GetResourceVersion()
		}
	}, 5*time.Second).Should(Succeed())
	g.Expect(len(seen)).To(BeNumerically("<", 10))

	// A client resumes from the last version it saw and misses nothing.
	resumed, err := s.Watch(nodes, "", WatchOptions{ResourceVersion: last})
	g.Expect(err).NotTo(HaveOccurred())
	defer resumed.Stop()
	for len(seen) < 10 {
		e := next(g, resumed)
		g.Expect(e.Type).To(Equal(watch.Added))
		name := e.Object.(*unstructured.Unstructured).GetName()
		g.Expect(seen).NotTo(HaveKey(name))
		seen[name] = true
	}
}

func TestStopEndsTheWatch(t *testing.T) {
	g := NewWithT(t)
	s := New(Options{})
	w, err := s.Watch(nodes, "", WatchOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	w.Stop()
	g.Eventually(w.ResultChan(), 5*time.Second).Should(BeClosed())
	g.Eventually(func() int {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.watchers)
	}, 5*time.Second).Should(BeZero())
}

func TestCloseEndsWatches(t *testing.T) {
	g := NewWithT(t)
	s := New(Options{})
	w, err := s.Watch(nodes, "", WatchOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	s.Close()
	g.Eventually(w.ResultChan(), 5*time.Second).Should(BeClosed())
	_, err = s.Watch(nodes, "", WatchOptions{})
	g.Expect(apierrors.IsServiceUnavailable(err)).To(BeTrue(), "got %v", err)
}

func TestDryRunChecksEverythingAndStoresNothing(t *testing.T) {
	g := NewWithT(t)
	s := New(Options{})
	rv := s.ResourceVersion()

	would, err := s.Create(nodes, node("n"), DryRun())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(would.GetUID()).NotTo(BeEmpty())
	g.Expect(would.GetResourceVersion()).To(BeEmpty())
	_, err = s.Get(nodes, "", "n")
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "got %v", err)
	_, err = s.Create(pods, pod("missing", "p", "", nil), DryRun())
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "a dry run checks the namespace, got %v", err)
	g.Expect(s.ResourceVersion()).To(Equal(rv))

	n, err := s.Create(nodes, node("n"))
	g.Expect(err).NotTo(HaveOccurred())
	changed := n.DeepCopy()
	changed.SetLabels(map[string]string{"a": "b"})
	would, err = s.Update(nodes, changed, DryRun())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(would.GetLabels()).To(HaveKeyWithValue("a", "b"))
	stale := changed.DeepCopy()
	stale.SetResourceVersion("1")
	_, err = s.Update(nodes, stale, DryRun())
	g.Expect(apierrors.IsConflict(err)).To(BeTrue(), "got %v", err)

	_, gone, err := s.Delete(nodes, "", "n", Preconditions{}, DryRun())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(gone).To(BeTrue())
	got, err := s.Get(nodes, "", "n")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.GetLabels()).To(BeEmpty())
	g.Expect(got.GetResourceVersion()).To(Equal(n.GetResourceVersion()))
}

func TestListPagesAreConsistentOrExpire(t *testing.T) {
	g := NewWithT(t)
	s := New(Options{})
	for i := range 5 {
		_, err := s.Create(nodes, node("n"+strconv.Itoa(i)))
		g.Expect(err).NotTo(HaveOccurred())
	}
	first, err := s.ListPage(nodes, "", ListOptions{}, 2, "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(first.Items).To(HaveLen(2))
	g.Expect(*first.RemainingItemCount).To(Equal(int64(3)))
	g.Expect(first.Continue).NotTo(BeEmpty())

	// A change elsewhere does not disturb the pages of this resource.
	_, err = s.Create(pods, pod("default", "p", "", nil))
	g.Expect(err).NotTo(HaveOccurred())
	second, err := s.ListPage(nodes, "", ListOptions{}, 2, first.Continue)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(second.Items[0].GetName()).To(Equal("n2"))
	g.Expect(second.ResourceVersion).To(Equal(first.ResourceVersion))
	last, err := s.ListPage(nodes, "", ListOptions{}, 2, second.Continue)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(last.Items).To(HaveLen(1))
	g.Expect(last.Continue).To(BeEmpty())

	// A change to the resource makes the token unservable.
	_, err = s.Create(nodes, node("n9"))
	g.Expect(err).NotTo(HaveOccurred())
	_, err = s.ListPage(nodes, "", ListOptions{}, 2, second.Continue)
	g.Expect(apierrors.IsResourceExpired(err)).To(BeTrue(), "got %v", err)

	_, err = s.ListPage(nodes, "", ListOptions{}, 2, "garbage!")
	g.Expect(apierrors.IsBadRequest(err)).To(BeTrue(), "got %v", err)
}
