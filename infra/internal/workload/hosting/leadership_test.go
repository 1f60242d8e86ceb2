package hosting_test

import (
	"context"
	"net/netip"
	"strconv"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/hosting"
)

// published is the leader's address as a Lease would hold it.
type published struct {
	mu   sync.Mutex
	addr string
}

func (p *published) publish(_ context.Context, addr string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.addr = addr
	return nil
}

func (p *published) leader(context.Context) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.addr, nil
}

// Two replicas on two addresses: a client of the follower is forwarded to
// the leader's store; once the leader is gone, a connection to the
// follower waits for it to be elected, which loads the cluster from the
// journal both share and serves it, every object kept.
func TestTheFollowerForwardsToTheLeaderAndTakesOver(t *testing.T) {
	g := NewWithT(t)
	r := freeRange(g, 1)
	const name = "workload.leadership.test"
	cluster := client.ObjectKey{Namespace: "ns", Name: "a"}
	endpoint := clusterv1.APIEndpoint{Host: name, Port: int32(r.First)}
	port := strconv.Itoa(r.First)
	secrets, cfgA := clusterCA(g, cluster, endpoint, "127.0.0.2:"+port)
	dir := t.TempDir()
	lease := &published{}
	replica := func(self string, elected chan struct{}) *hosting.Hosting {
		h, err := hosting.New(hosting.Options{
			Address: netip.MustParseAddr(self), AdvertiseHost: name, Ports: r, Secrets: secrets, StateDir: dir,
			Leadership: &hosting.Leadership{Elected: elected, Self: self, Publish: lease.publish, Leader: lease.leader},
		})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(h.NeedLeaderElection()).To(BeFalse(), "every replica listens")
		return h
	}
	electedA, electedB := make(chan struct{}), make(chan struct{})
	a, b := replica("127.0.0.2", electedA), replica("127.0.0.3", electedB)
	ctxA, stopA := context.WithCancel(t.Context())
	doneA := make(chan error, 1)
	go func() { doneA <- a.Start(ctxA) }()
	ctxB, stopB := context.WithCancel(t.Context())
	defer stopB()
	go func() { _ = b.Start(ctxB) }()
	close(electedA)
	g.Eventually(func() (string, error) { return lease.leader(t.Context()) }, 10*time.Second).Should(Equal("127.0.0.2"))

	got, err := a.Serve(t.Context(), cluster, clusterv1.APIEndpoint{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(endpoint))
	_, err = b.Serve(t.Context(), cluster, endpoint)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(b.Cluster(cluster)).To(BeNil(), "the follower has no store: it forwards")

	cfgB := *cfgA
	cfgB.Dial = dialTo("127.0.0.3:" + port)
	viaB, err := kubernetes.NewForConfig(&cfgB)
	g.Expect(err).NotTo(HaveOccurred())
	var created *corev1.ConfigMap
	g.Eventually(func(g Gomega) {
		created, err = viaB.CoreV1().ConfigMaps("default").Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "users"}}, metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
	}, 10*time.Second).Should(Succeed())
	_, err = a.Cluster(cluster).Store().Get(configMapsResource, "default", "users")
	g.Expect(err).NotTo(HaveOccurred(), "written into the leader's store")

	// The leader goes; a client of the follower waits for the takeover.
	stopA()
	g.Expect(<-doneA).To(Succeed())
	answered := make(chan *corev1.ConfigMap, 1)
	go func() {
		cm, err := viaB.CoreV1().ConfigMaps("default").Get(context.Background(), "users", metav1.GetOptions{})
		if err == nil {
			answered <- cm
		}
		close(answered)
	}()
	close(electedB)
	var cm *corev1.ConfigMap
	g.Eventually(answered, 20*time.Second).Should(Receive(&cm), "the waiting request is served by the new leader")
	g.Expect(cm.UID).To(Equal(created.UID))
	g.Eventually(func() (string, error) { return lease.leader(t.Context()) }, 10*time.Second).Should(Equal("127.0.0.3"))
	g.Expect(b.Cluster(cluster)).NotTo(BeNil())
	b.Remove(cluster)
}
