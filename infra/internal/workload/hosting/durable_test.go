package hosting_test

import (
	"context"
	"errors"
	"net/netip"
	"strconv"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/hosting"
	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
)

// heldJournal keeps nothing and lets the test decide when a Wait returns.
type heldJournal struct {
	waiting chan struct{} // receives once per Wait entered
	release chan error    // a Wait returns what it receives
}

func (heldJournal) Put(store.Resource, *unstructured.Unstructured, []byte, uint64) {}
func (heldJournal) Delete(store.Resource, string, string, uint64)                  {}
func (j heldJournal) Wait(ctx context.Context) error {
	j.waiting <- struct{}{}
	select {
	case err := <-j.release:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}
func (heldJournal) Close() error   { return nil }
func (heldJournal) Discard() error { return nil }

type heldJournals struct{ j heldJournal }

func (h heldJournals) Open(context.Context, types.NamespacedName, bool) (hosting.Journal, []store.Restored, uint64, error) {
	return h.j, nil, 0, nil
}

// A write through the workload API is answered only once the cluster's
// journal keeps it; one it cannot keep is a 504 Timeout Status. Reads do
// not wait.
func TestAWriteIsAnsweredOnceItsJournalKeepsIt(t *testing.T) {
	g := NewWithT(t)
	r := freeRange(g, 1)
	cluster := client.ObjectKey{Namespace: "ns", Name: "a"}
	endpoint := clusterv1.APIEndpoint{Host: "127.0.0.1", Port: int32(r.First)}
	secrets, cfg := clusterCA(g, cluster, endpoint, "127.0.0.1:"+strconv.Itoa(r.First))
	j := heldJournal{waiting: make(chan struct{}, 1), release: make(chan error)}
	h, err := hosting.New(hosting.Options{
		Address: netip.MustParseAddr("127.0.0.1"), Ports: r, Secrets: secrets, Journals: heldJournals{j},
	})
	g.Expect(err).NotTo(HaveOccurred())
	defer h.Remove(cluster)
	_, err = h.Serve(t.Context(), cluster, clusterv1.APIEndpoint{})
	g.Expect(err).NotTo(HaveOccurred())
	cs, err := kubernetes.NewForConfig(cfg)
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) {
		_, err := cs.CoreV1().Namespaces().Get(t.Context(), "default", metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
	}, 10*time.Second).Should(Succeed(), "reads are answered without waiting")

	var mu sync.Mutex
	var createErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, err := cs.CoreV1().ConfigMaps("default").Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kept"}}, metav1.CreateOptions{})
		mu.Lock()
		createErr = err
		mu.Unlock()
	}()
	g.Eventually(j.waiting, 10*time.Second).Should(Receive(), "the answer waits for the journal")
	g.Expect(done).NotTo(BeClosed())
	j.release <- nil
	g.Eventually(done, 10*time.Second).Should(BeClosed())
	mu.Lock()
	g.Expect(createErr).NotTo(HaveOccurred())
	mu.Unlock()

	go func() { <-j.waiting; j.release <- errors.New("the management cluster refused") }()
	_, err = cs.CoreV1().ConfigMaps("default").Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "lost"}}, metav1.CreateOptions{})
	g.Expect(apierrors.IsTimeout(err)).To(BeTrue(), "%v", err)
}
