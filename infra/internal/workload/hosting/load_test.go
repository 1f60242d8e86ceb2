package hosting_test

import (
	"context"
	"net/netip"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/hosting"
	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
)

// keptJournal keeps nothing; every write is kept at once.
type keptJournal struct{}

func (keptJournal) Put(store.Resource, *unstructured.Unstructured, []byte, uint64) {}
func (keptJournal) Delete(store.Resource, string, string, uint64)                  {}
func (keptJournal) Wait(context.Context) error                                     { return nil }
func (keptJournal) Close() error                                                   { return nil }
func (keptJournal) Discard() error                                                 { return nil }

// gatedJournals holds every Open until gate is closed, and counts them.
type gatedJournals struct {
	gate   chan struct{}
	opened chan types.NamespacedName

	mu    sync.Mutex
	opens map[types.NamespacedName]int
}

func (j *gatedJournals) Open(ctx context.Context, cluster types.NamespacedName, _ bool) (hosting.Journal, []store.Restored, uint64, error) {
	j.mu.Lock()
	j.opens[cluster]++
	j.mu.Unlock()
	j.opened <- cluster
	select {
	case <-j.gate:
	case <-ctx.Done():
		return nil, nil, 0, ctx.Err()
	}
	return keptJournal{}, nil, 0, nil
}

func (j *gatedJournals) count(cluster types.NamespacedName) int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.opens[cluster]
}

// A restarted process loads its recorded clusters' stores side by side,
// not one after another, and each once: a Serve of a cluster being loaded
// (its MonolithCluster reconciled meanwhile) waits for that load, the
// clusters already known answer lookups meanwhile, and a client that
// connects while its cluster loads is answered once it has.
func TestARestartLoadsEveryStoreOnceSideBySide(t *testing.T) {
	g := NewWithT(t)
	const n = 4
	r := freeRange(g, n)
	recorded := make([]hosting.Recorded, 0, n)
	for i := range n {
		recorded = append(recorded, hosting.Recorded{
			Cluster:  key("c" + string(rune('0'+i))),
			Endpoint: clusterv1.APIEndpoint{Host: "127.0.0.1", Port: int32(r.First + i)},
		})
	}
	first := recorded[0]
	secrets, cfg := clusterCA(g, first.Cluster, first.Endpoint, netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(first.Endpoint.Port)).String())
	journals := &gatedJournals{gate: make(chan struct{}), opened: make(chan types.NamespacedName, 2*n), opens: map[types.NamespacedName]int{}}
	h, err := hosting.New(hosting.Options{
		Address: netip.MustParseAddr("127.0.0.1"), Ports: r, Secrets: secrets, Journals: journals,
		Own: func(context.Context) ([]hosting.Recorded, error) { return recorded, nil },
	})
	g.Expect(err).NotTo(HaveOccurred())
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- h.Start(ctx) }()
	defer func() {
		stop()
		g.Expect(<-done).To(Succeed())
	}()

	// Every load is in flight at once: one after another, the second
	// would not start before the gate opens.
	for range n {
		g.Eventually(journals.opened, 10*time.Second).Should(Receive())
	}
	g.Expect(h.Len()).To(Equal(n), "every listener is open while the stores load")
	g.Expect(h.Cluster(first.Cluster)).To(BeNil(), "a cluster is not served before its store is loaded")

	served := make(chan clusterv1.APIEndpoint, 1)
	go func() {
		e, err := h.Serve(context.Background(), first.Cluster, first.Endpoint)
		if err == nil {
			served <- e
		}
		close(served)
	}()
	cs, err := kubernetes.NewForConfig(cfg)
	g.Expect(err).NotTo(HaveOccurred())
	answered := make(chan error, 1)
	go func() {
		_, err := cs.CoreV1().ConfigMaps("default").Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "early"}}, metav1.CreateOptions{})
		answered <- err
	}()
	g.Consistently(answered, 200*time.Millisecond).ShouldNot(Receive(), "the client waits for the store")

	close(journals.gate)
	g.Eventually(served, 10*time.Second).Should(Receive(Equal(first.Endpoint)))
	g.Eventually(answered, 10*time.Second).Should(Receive(BeNil()), "the waiting client is answered from the loaded store")
	for _, rec := range recorded {
		g.Eventually(func() *hosting.Cluster { return h.Cluster(rec.Cluster) }, 10*time.Second).ShouldNot(BeNil())
		g.Expect(journals.count(rec.Cluster)).To(Equal(1), "cluster %s's journal is opened once", rec.Cluster)
	}
	_, err = h.Cluster(first.Cluster).Store().Get(configMapsResource, "default", "early")
	g.Expect(err).NotTo(HaveOccurred())
}
