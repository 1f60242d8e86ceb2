package apiserver

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
)

// recorder keeps what an informer's handlers saw.
type recorder struct {
	mu                      sync.Mutex
	added, updated, deleted []string
}

func (r *recorder) handler() cache.ResourceEventHandlerFuncs {
	name := func(obj any) string {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		return obj.(*corev1.ConfigMap).Name
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.added = append(r.added, name(obj))
		},
		UpdateFunc: func(_, obj any) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.updated = append(r.updated, name(obj))
		},
		DeleteFunc: func(obj any) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.deleted = append(r.deleted, name(obj))
		},
	}
}

func (r *recorder) snapshot() (added, updated, deleted []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.added...), append([]string(nil), r.updated...), append([]string(nil), r.deleted...)
}

func cacheNames(informer cache.SharedIndexInformer) []string {
	var names []string
	for _, obj := range informer.GetStore().List() {
		names = append(names, obj.(*corev1.ConfigMap).Name)
	}
	return names
}

func startInformer(t *testing.T, ts *testServer) (cache.SharedIndexInformer, *recorder) {
	t.Helper()
	cs := clientset(t, ts, "c1")
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace("default"))
	informer := factory.Core().V1().ConfigMaps().Informer()
	rec := &recorder{}
	if _, err := informer.AddEventHandler(rec.handler()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() {
		cancel()
		factory.Shutdown()
	})
	factory.Start(ctx.Done())
	synced := factory.WaitForCacheSync(ctx.Done())
	for typ, ok := range synced {
		if !ok {
			t.Fatalf("%v did not sync", typ)
		}
	}
	return informer, rec
}

func configMap(name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Data: map[string]string{"k": "v"}}
}

func TestInformerSeesCreatesUpdatesAndDeletes(t *testing.T) {
	g := NewWithT(t)
	ts := startServer(t, store.Options{}, "c1")
	cs := clientset(t, ts, "c1")
	ctx := context.Background()
	_, err := cs.CoreV1().ConfigMaps("default").Create(ctx, configMap("before"), metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())

	informer, rec := startInformer(t, ts)
	g.Expect(cacheNames(informer)).To(ConsistOf("before"))

	_, err = cs.CoreV1().ConfigMaps("default").Create(ctx, configMap("after"), metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	cm := configMap("after")
	cm.Data["k"] = "changed"
	_, err = cs.CoreV1().ConfigMaps("default").Update(ctx, cm, metav1.UpdateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cs.CoreV1().ConfigMaps("default").Delete(ctx, "before", metav1.DeleteOptions{})).To(Succeed())

	g.Eventually(func(g Gomega) {
		added, updated, deleted := rec.snapshot()
		g.Expect(added).To(ConsistOf("before", "after"))
		g.Expect(updated).To(ConsistOf("after"))
		g.Expect(deleted).To(ConsistOf("before"))
	}, 10*time.Second, 20*time.Millisecond).Should(Succeed())
	g.Expect(cacheNames(informer)).To(ConsistOf("after"))
}

func TestInformerResumesAfterTheWatchDrops(t *testing.T) {
	g := NewWithT(t)
	ts := startServer(t, store.Options{}, "c1")
	cs := clientset(t, ts, "c1")
	ctx := context.Background()
	informer, rec := startInformer(t, ts)
	warmUp(g, cs, informer)
	watchesBefore := len(ts.faults.watchRequests())

	ts.faults.cutWatches(false)
	_, err := cs.CoreV1().ConfigMaps("default").Create(ctx, configMap("during"), metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() []string { return cacheNames(informer) }, 10*time.Second, 20*time.Millisecond).Should(ConsistOf("warm-up", "during"))
	added, _, _ := rec.snapshot()
	g.Expect(added).To(Equal([]string{"warm-up", "during"}))

	// The reflector came back with a plain watch from the version it had
	// reached: a resume, not a relist.
	g.Eventually(func(g Gomega) {
		watches := ts.faults.watchRequests()[watchesBefore:]
		g.Expect(watches).NotTo(BeEmpty())
		g.Expect(watches[0].Get("resourceVersion")).NotTo(BeEmpty())
		g.Expect(watches[0].Get("sendInitialEvents")).To(BeEmpty())
	}, 10*time.Second, 20*time.Millisecond).Should(Succeed())
}

func TestInformerRelistsAfterGone(t *testing.T) {
	g := NewWithT(t)
	ts := startServer(t, store.Options{HistorySize: 3}, "c1")
	cs := clientset(t, ts, "c1")
	ctx := context.Background()
	_, err := cs.CoreV1().ConfigMaps("default").Create(ctx, configMap("doomed"), metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	informer, rec := startInformer(t, ts)
	warmUp(g, cs, informer)

	// While the informer cannot watch, more changes happen than the history keeps.
	ts.faults.cutWatches(true)
	watchesBefore := len(ts.faults.watchRequests())
	g.Expect(cs.CoreV1().ConfigMaps("default").Delete(ctx, "doomed", metav1.DeleteOptions{})).To(Succeed())
	for i := range 5 {
		_, err := cs.CoreV1().ConfigMaps("default").Create(ctx, configMap("new-"+strconv.Itoa(i)), metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
	}
	ts.faults.release()

	g.Eventually(func() []string { return cacheNames(informer) }, 20*time.Second, 20*time.Millisecond).
		Should(ConsistOf("warm-up", "new-0", "new-1", "new-2", "new-3", "new-4"))
	_, _, deleted := rec.snapshot()
	g.Expect(deleted).To(ConsistOf("doomed"))

	// Its resume got 410 Gone, and it started over from the current state.
	watches := ts.faults.watchRequests()[watchesBefore:]
	var resumed, relisted bool
	for _, w := range watches {
		if w.Get("resourceVersion") != "" && w.Get("sendInitialEvents") == "" {
			resumed = true
		}
		if resumed && w.Get("sendInitialEvents") == "true" {
			relisted = true
		}
	}
	g.Expect(resumed).To(BeTrue(), "watches: %v", watches)
	g.Expect(relisted).To(BeTrue(), "watches: %v", watches)
}

// warmUp makes the informer's watch deliver an event, so that when it is
// cut the reflector resumes with a plain watch from its resourceVersion
// (a watch that ends before any event makes it start over instead).
func warmUp(g Gomega, cs *kubernetes.Clientset, informer cache.SharedIndexInformer) {
	_, err := cs.CoreV1().ConfigMaps("default").Create(context.Background(), configMap("warm-up"), metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() []string { return cacheNames(informer) }, 10*time.Second, 20*time.Millisecond).Should(ContainElement("warm-up"))
}

// classicListWatch makes a reflector list then watch, as clients without
// watch-list (client-go before v0.35, or with it switched off) do.
type classicListWatch struct{ *cache.ListWatch }

func (classicListWatch) IsWatchListSemanticsUnSupported() bool { return true }

func TestListThenWatchInformerRelistsAfterGone(t *testing.T) {
	g := NewWithT(t)
	ts := startServer(t, store.Options{HistorySize: 3}, "c1")
	cs := clientset(t, ts, "c1")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := cs.CoreV1().ConfigMaps("default").Create(ctx, configMap("doomed"), metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())

	lw := classicListWatch{cache.NewListWatchFromClient(cs.CoreV1().RESTClient(), "configmaps", "default", fields.Everything())}
	informer := cache.NewSharedIndexInformer(lw, &corev1.ConfigMap{}, 0, cache.Indexers{})
	rec := &recorder{}
	_, err = informer.AddEventHandler(rec.handler())
	g.Expect(err).NotTo(HaveOccurred())
	go informer.RunWithContext(ctx)
	g.Expect(cache.WaitForCacheSync(ctx.Done(), informer.HasSynced)).To(BeTrue())
	g.Expect(cacheNames(informer)).To(ConsistOf("doomed"))
	warmUp(g, cs, informer)

	// Its first watch started from the list's resourceVersion, without initial events.
	first := ts.faults.watchRequests()[0]
	g.Expect(first.Get("resourceVersion")).NotTo(BeEmpty())
	g.Expect(first.Get("sendInitialEvents")).To(BeEmpty())

	ts.faults.cutWatches(true)
	requests := ts.faults.served()
	g.Expect(cs.CoreV1().ConfigMaps("default").Delete(ctx, "doomed", metav1.DeleteOptions{})).To(Succeed())
	for i := range 5 {
		_, err := cs.CoreV1().ConfigMaps("default").Create(ctx, configMap("new-"+strconv.Itoa(i)), metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
	}
	changes := 6
	ts.faults.release()

	g.Eventually(func() []string { return cacheNames(informer) }, 20*time.Second, 20*time.Millisecond).
		Should(ConsistOf("warm-up", "new-0", "new-1", "new-2", "new-3", "new-4"))
	_, _, deleted := rec.snapshot()
	g.Expect(deleted).To(ConsistOf("doomed"))
	g.Expect(ts.faults.served()).To(BeNumerically(">", requests+changes), "after the 410 it listed again")
}
