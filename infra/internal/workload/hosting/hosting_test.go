package hosting_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/hosting"
	"github.com/capi-monolith/capi-monolith/infra/internal/workload/journal"
	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
)

// freeRange finds n consecutive ports nothing listens on now.
// freeRange finds n consecutive free loopback ports in 12000-19999: below
// the workload API's default range (dev and the infra suites serve from it)
// and below Linux's ephemeral ports, which any outgoing connection on the
// machine may take between this check and the hosting's listen.
func freeRange(g Gomega, n int) hosting.PortRange {
	const from, to = 12000, 20000
	start := from + rand.N((to-from)/2)
	for first := start; first+n <= to; first += n {
		ok := true
		for p := first; p < first+n; p++ {
			l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
			if err != nil {
				ok = false
				break
			}
			_ = l.Close()
		}
		if ok {
			return hosting.PortRange{First: first, Last: first + n - 1}
		}
	}
	g.Expect("a free range").To(BeEmpty())
	return hosting.PortRange{}
}

func newHosting(g Gomega, ports hosting.PortRange, recorded ...clusterv1.APIEndpoint) *hosting.Hosting {
	h, err := hosting.New(hosting.Options{
		Address: netip.MustParseAddr("127.0.0.1"),
		Ports:   ports,
		// No CA Secret exists: the port handling is what is tested here
		// (infra/workload_test.go serves real clusters).
		Secrets:   fake.NewClientBuilder().Build(),
		Endpoints: func(context.Context) ([]clusterv1.APIEndpoint, error) { return recorded, nil },
	})
	g.Expect(err).NotTo(HaveOccurred())
	return h
}

func key(name string) types.NamespacedName { return types.NamespacedName{Namespace: "ns", Name: name} }

// Each cluster gets a port of its own; ports recorded by clusters not yet
// served again, and ports another process holds, are skipped; a full range
// is an error; a removed cluster's port is free again.
func TestPortsAreHandedOutOncePerCluster(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	r := freeRange(g, 4)
	recorded := clusterv1.APIEndpoint{Host: "127.0.0.1", Port: int32(r.First + 1)}
	h := newHosting(g, r, recorded)
	defer h.Remove(key("a"))

	held, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(r.First+2))
	g.Expect(err).NotTo(HaveOccurred())
	defer held.Close()

	a, err := h.Serve(ctx, key("a"), clusterv1.APIEndpoint{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(a).To(Equal(clusterv1.APIEndpoint{Host: "127.0.0.1", Port: int32(r.First)}))
	again, err := h.Serve(ctx, key("a"), a)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again).To(Equal(a), "a served cluster keeps its endpoint")

	b, err := h.Serve(ctx, key("b"), clusterv1.APIEndpoint{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(b.Port).To(Equal(int32(r.Last)), "the recorded port and the one another process holds are skipped")

	_, err = h.Serve(ctx, key("c"), clusterv1.APIEndpoint{})
	g.Expect(err).To(MatchError(ContainSubstring("no free port left")))

	// The cluster that recorded a port gets it back.
	rec, err := h.Serve(ctx, key("recorded"), recorded)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rec).To(Equal(recorded))
	g.Expect(h.Len()).To(Equal(3))

	h.Remove(key("b"))
	_, err = net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(r.Last), 0)
	g.Expect(err).To(HaveOccurred(), "a removed cluster's listener is closed")
	c, err := h.Serve(ctx, key("c"), clusterv1.APIEndpoint{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.Port).To(Equal(int32(r.Last)))
	h.Remove(key("c"))
	h.Remove(key("recorded"))
	h.Remove(key("never-served"))
	g.Expect(h.Len()).To(Equal(1))
}

// A recorded endpoint another process listens on (the source management
// cluster's manager, just after clusterctl move) is reported as in use, and
// served once the other process lets it go.
func TestRecordedEndpointHeldElsewhereIsServedOnceLetGo(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	r := freeRange(g, 2)
	recorded := clusterv1.APIEndpoint{Host: "127.0.0.1", Port: int32(r.First)}
	h := newHosting(g, r, recorded)
	defer h.Remove(key("moved"))

	held, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(r.First))
	g.Expect(err).NotTo(HaveOccurred())
	_, err = h.Serve(ctx, key("moved"), recorded)
	g.Expect(errors.Is(err, hosting.ErrEndpointInUse)).To(BeTrue(), "%v", err)
	g.Expect(h.Len()).To(BeZero())

	g.Expect(held.Close()).To(Succeed())
	got, err := h.Serve(ctx, key("moved"), recorded)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(recorded))
}

// An endpoint off the address or the range is not served, and says so.
func TestEndpointsElsewhereAreNotHosted(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	r := freeRange(g, 2)
	h := newHosting(g, r)
	for _, e := range []clusterv1.APIEndpoint{
		{Host: "10.128.0.1", Port: 6443},
		{Host: "127.0.0.1", Port: int32(r.Last + 1)},
	} {
		_, err := h.Serve(ctx, key("x"), e)
		g.Expect(errors.Is(err, hosting.ErrNotHosted)).To(BeTrue(), "%v: %v", e, err)
		g.Expect(h.Hosts(e)).To(BeFalse())
	}
	g.Expect(h.Len()).To(BeZero())
}

func TestAddressMustBeDialable(t *testing.T) {
	g := NewWithT(t)
	_, err := hosting.New(hosting.Options{Address: netip.MustParseAddr("0.0.0.0"), Secrets: fake.NewClientBuilder().Build()})
	g.Expect(err).To(MatchError(ContainSubstring("clients cannot dial")))
}

// A cluster whose endpoint no MonolithCluster records any more (clusterctl
// move deleted the source's objects without a reconcile) stops being
// served once past the grace period; a recorded one stays.
func TestClustersNoLongerRecordedAreNoLongerServed(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	r := freeRange(g, 2)
	var (
		mu       sync.Mutex
		now      = time.Now()
		recorded []clusterv1.APIEndpoint
	)
	h, err := hosting.New(hosting.Options{
		Address: netip.MustParseAddr("127.0.0.1"),
		Ports:   r,
		Secrets: fake.NewClientBuilder().Build(),
		Endpoints: func(context.Context) ([]clusterv1.APIEndpoint, error) {
			mu.Lock()
			defer mu.Unlock()
			return slices.Clone(recorded), nil
		},
		SweepInterval: 10 * time.Millisecond,
		Now: func() time.Time {
			mu.Lock()
			defer mu.Unlock()
			return now
		},
	})
	g.Expect(err).NotTo(HaveOccurred())
	done := make(chan error, 1)
	go func() { done <- h.Start(ctx) }()

	kept, err := h.Serve(ctx, key("kept"), clusterv1.APIEndpoint{})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = h.Serve(ctx, key("moved"), clusterv1.APIEndpoint{})
	g.Expect(err).NotTo(HaveOccurred())
	mu.Lock()
	recorded = []clusterv1.APIEndpoint{kept}
	mu.Unlock()
	g.Consistently(h.Len).WithTimeout(200*time.Millisecond).Should(Equal(2), "within the grace period both are served")

	mu.Lock()
	now = now.Add(time.Minute)
	mu.Unlock()
	g.Eventually(func() bool { return h.Cluster(key("moved")) == nil }).WithTimeout(5 * time.Second).Should(BeTrue())
	g.Expect(h.Cluster(key("kept"))).NotTo(BeNil())

	cancel()
	g.Eventually(done).WithTimeout(5 * time.Second).Should(Receive(BeNil()))
	_, err = net.DialTimeout("tcp", net.JoinHostPort(kept.Host, strconv.Itoa(int(kept.Port))), time.Second)
	g.Expect(err).To(HaveOccurred(), "every listener closes when the manager stops")
}

// The clusters of the process's own scope are served on their recorded
// endpoints from the start, reconciled or not (a paused cluster is not),
// so that no other process takes their ports; one whose endpoint another
// process still holds is served once it is let go.
func TestOwnClustersAreServedOnTheirRecordedEndpoints(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	r := freeRange(g, 3)
	paused := clusterv1.APIEndpoint{Host: "127.0.0.1", Port: int32(r.First)}
	moved := clusterv1.APIEndpoint{Host: "127.0.0.1", Port: int32(r.First + 1)}
	elsewhere := clusterv1.APIEndpoint{Host: "10.0.0.1", Port: 6443}
	held, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(int(moved.Port)))
	g.Expect(err).NotTo(HaveOccurred())
	defer held.Close()
	h, err := hosting.New(hosting.Options{
		Address: netip.MustParseAddr("127.0.0.1"),
		Ports:   r,
		Secrets: fake.NewClientBuilder().Build(),
		Own: func(context.Context) ([]hosting.Recorded, error) {
			return []hosting.Recorded{
				{Cluster: key("paused"), Endpoint: paused},
				{Cluster: key("moved"), Endpoint: moved},
				{Cluster: key("elsewhere"), Endpoint: elsewhere},
				{Cluster: key("no-endpoint-yet")},
			}, nil
		},
		SweepInterval: 10 * time.Millisecond,
	})
	g.Expect(err).NotTo(HaveOccurred())
	done := make(chan error, 1)
	go func() { done <- h.Start(ctx) }()

	g.Eventually(func() *hosting.Cluster { return h.Cluster(key("paused")) }).WithTimeout(5 * time.Second).ShouldNot(BeNil())
	g.Expect(h.Cluster(key("paused")).Endpoint()).To(Equal(paused))
	c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(int(paused.Port)), time.Second)
	g.Expect(err).NotTo(HaveOccurred(), "the paused cluster's port is listened on")
	_ = c.Close()
	g.Consistently(func() *hosting.Cluster { return h.Cluster(key("moved")) }).WithTimeout(100 * time.Millisecond).Should(BeNil())

	g.Expect(held.Close()).To(Succeed())
	g.Eventually(func() *hosting.Cluster { return h.Cluster(key("moved")) }).WithTimeout(5 * time.Second).ShouldNot(BeNil())
	g.Expect(h.Cluster(key("moved")).Endpoint()).To(Equal(moved))
	g.Expect(h.Len()).To(Equal(2), "neither an endpoint elsewhere nor a cluster without one is served")

	cancel()
	g.Eventually(done).WithTimeout(5 * time.Second).Should(Receive(BeNil()))
}

// Two MonolithClusters recording one endpoint (issue 28: the second was
// accepted, and after a restart both raced for the port in cache order):
// the endpoint is served only for the cluster that recorded it first,
// whichever asks first.
func TestAnEndpointTwoClustersRecordIsServedOnlyForTheFirst(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	r := freeRange(g, 2)
	recorded := clusterv1.APIEndpoint{Host: "127.0.0.1", Port: int32(r.First)}
	h, err := hosting.New(hosting.Options{
		Address: netip.MustParseAddr("127.0.0.1"),
		Ports:   r,
		Secrets: fake.NewClientBuilder().Build(),
		Endpoints: func(context.Context) ([]clusterv1.APIEndpoint, error) {
			return []clusterv1.APIEndpoint{recorded, recorded}, nil
		},
		FirstRecorder: func(_ context.Context, e clusterv1.APIEndpoint) (types.NamespacedName, bool, error) {
			return key("older"), e == recorded, nil
		},
	})
	g.Expect(err).NotTo(HaveOccurred())
	defer h.Remove(key("older"))
	defer h.Remove(key("younger"))

	_, err = h.Serve(ctx, key("younger"), recorded)
	g.Expect(errors.Is(err, hosting.ErrEndpointInUse)).To(BeTrue(), "%v", err)
	g.Expect(err).To(MatchError(ContainSubstring("recorded first by cluster ns/older")))
	g.Expect(h.Len()).To(BeZero(), "the younger cluster never binds the port")

	got, err := h.Serve(ctx, key("older"), recorded)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(recorded))
	_, err = h.Serve(ctx, key("younger"), recorded)
	g.Expect(err).To(HaveOccurred())
}

// When the manager stops, Start returns only once every listener is closed
// (a restarted manager takes the same ports at once), and nothing is
// served after.
func TestStopClosesEveryListenerBeforeStartReturns(t *testing.T) {
	g := NewWithT(t)
	r := freeRange(g, 2)
	h := newHosting(g, r)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- h.Start(ctx) }()

	a, err := h.Serve(t.Context(), key("a"), clusterv1.APIEndpoint{})
	g.Expect(err).NotTo(HaveOccurred())
	address := net.JoinHostPort(a.Host, strconv.Itoa(int(a.Port)))
	c, err := net.DialTimeout("tcp", address, time.Second)
	g.Expect(err).NotTo(HaveOccurred())
	_ = c.Close()

	cancel()
	g.Expect(<-done).To(Succeed())
	l, err := net.Listen("tcp", address)
	g.Expect(err).NotTo(HaveOccurred(), "the port is free once Start has returned")
	_ = l.Close()
	g.Expect(h.Len()).To(BeZero())
	_, err = h.Serve(t.Context(), key("b"), clusterv1.APIEndpoint{})
	g.Expect(errors.Is(err, hosting.ErrStopped)).To(BeTrue(), "%v", err)
}

// With a StateDir, a cluster served again on its recorded endpoint (after
// a restart) gets back its objects; a cluster served for the first time
// starts empty whatever an earlier cluster of its name left; a removed
// cluster's journal goes with it.
func TestStateDirKeepsAClustersObjectsAcrossARestart(t *testing.T) {
	g := NewWithT(t)
	r := freeRange(g, 2)
	dir := t.TempDir()
	newStateful := func() *hosting.Hosting {
		h, err := hosting.New(hosting.Options{
			Address: netip.MustParseAddr("127.0.0.1"), Ports: r, StateDir: dir,
			Secrets: fake.NewClientBuilder().Build(),
		})
		g.Expect(err).NotTo(HaveOccurred())
		return h
	}
	cm := &unstructured.Unstructured{}
	cm.SetAPIVersion("v1")
	cm.SetKind("ConfigMap")
	cm.SetNamespace("default")
	cm.SetName("users")
	configMaps := store.Resource{Resource: "configmaps", Namespaced: true}

	h := newStateful()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- h.Start(ctx) }()
	a, err := h.Serve(t.Context(), key("a"), clusterv1.APIEndpoint{})
	g.Expect(err).NotTo(HaveOccurred())
	stored, err := h.Cluster(key("a")).Store().Create(configMaps, cm)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = h.Serve(t.Context(), key("b"), clusterv1.APIEndpoint{})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = h.Cluster(key("b")).Store().Create(configMaps, cm)
	g.Expect(err).NotTo(HaveOccurred())
	cancel()
	g.Expect(<-done).To(Succeed())

	h = newStateful()
	defer h.Remove(key("b"))
	_, err = h.Serve(t.Context(), key("a"), a)
	g.Expect(err).NotTo(HaveOccurred())
	got, err := h.Cluster(key("a")).Store().Get(configMaps, "default", "users")
	g.Expect(err).NotTo(HaveOccurred(), "served again on its recorded endpoint: its objects are back")
	g.Expect(got.GetUID()).To(Equal(stored.GetUID()))

	_, err = h.Serve(t.Context(), key("b"), clusterv1.APIEndpoint{})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = h.Cluster(key("b")).Store().Get(configMaps, "default", "users")
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "a cluster served for the first time starts empty")

	h.Remove(key("a"))
	g.Expect(journal.Path(dir, "ns", "a")).NotTo(BeAnExistingFile(), "a removed cluster's journal is removed")
}

// Every served cluster's store is bounded by Options.Limits and collects
// its garbage on Hosting's collector.
func TestServedClustersHaveTheirLimitsAndCollector(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	h, err := hosting.New(hosting.Options{
		Address: netip.MustParseAddr("127.0.0.1"),
		Ports:   freeRange(g, 1),
		Secrets: fake.NewClientBuilder().Build(),
		Limits:  store.Limits{MaxObjects: len(store.DefaultNamespaces) + 1},
	})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = h.Serve(ctx, key("a"), clusterv1.APIEndpoint{})
	g.Expect(err).NotTo(HaveOccurred())
	defer h.Remove(key("a"))
	s := h.Cluster(key("a")).Store()

	nodes := store.Resource{Resource: "nodes"}
	owner := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Node", "metadata": map[string]any{"name": "n"}}}
	owner, err = s.Create(nodes, owner)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = s.Create(nodes, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Node", "metadata": map[string]any{"name": "m"}}})
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "got %v", err)

	_, _, err = s.Delete(nodes, "", "n", store.Preconditions{})
	g.Expect(err).NotTo(HaveOccurred())
	dep := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Node", "metadata": map[string]any{"name": "dep"}}}
	dep.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "n", UID: owner.GetUID()}})
	_, err = s.Create(nodes, dep)
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() bool {
		_, err := s.Get(nodes, "", "dep")
		return apierrors.IsNotFound(err)
	}, 5*time.Second).Should(BeTrue(), "a dependent of a gone owner is collected")
}

// Every served cluster runs the workload controllers on its store, until
// it stops being served.
func TestServedClustersRunTheControllers(t *testing.T) {
	g := NewWithT(t)
	h := newHosting(g, freeRange(g, 1))
	_, err := h.Serve(t.Context(), key("a"), clusterv1.APIEndpoint{})
	g.Expect(err).NotTo(HaveOccurred())
	s := h.Cluster(key("a")).Store()
	replicaSets := store.Resource{Group: "apps", Resource: "replicasets", Namespaced: true}
	pods := store.Resource{Resource: "pods", Namespaced: true}
	rs := func(name string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apps/v1", "kind": "ReplicaSet",
			"metadata": map[string]any{"name": name, "namespace": "default"},
			"spec": map[string]any{
				"replicas": int64(2),
				"selector": map[string]any{"matchLabels": map[string]any{"app": name}},
				"template": map[string]any{
					"metadata": map[string]any{"labels": map[string]any{"app": name}},
					"spec":     map[string]any{"containers": []any{map[string]any{"name": "c", "image": "nginx"}}},
				},
			},
		}}
	}
	podsOf := func(app string) func() ([]*unstructured.Unstructured, error) {
		return func() ([]*unstructured.Unstructured, error) {
			items, _, err := s.List(pods, "default", store.ListOptions{LabelSelector: labels.SelectorFromSet(labels.Set{"app": app})})
			return items, err
		}
	}
	_, err = s.Create(replicaSets, rs("served"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(podsOf("served"), 10*time.Second, 10*time.Millisecond).Should(HaveLen(2))

	h.Remove(key("a"))
	_, err = s.Create(replicaSets, rs("removed"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Consistently(podsOf("removed"), 300*time.Millisecond, 30*time.Millisecond).Should(BeEmpty())
}
