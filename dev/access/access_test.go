package access_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/capi-monolith/capi-monolith/dev/access"
	"github.com/capi-monolith/capi-monolith/test/envtest"
)

var env *envtest.Environment

func TestMain(m *testing.M) {
	envtest.Main(m, &env, envtest.Options{})
}

// printed collects what Announce prints.
type printed struct {
	mu  sync.Mutex
	out []string
}

func (p *printed) Printf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.out = append(p.out, fmt.Sprintf(format, args...))
}

// All is every announcement so far.
func (p *printed) All() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.out...)
}

// About counts the announcements of namespace/name.
func (p *printed) About(namespace, name string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, s := range p.out {
		if strings.HasPrefix(s, fmt.Sprintf("Cluster %s/%s is up,", namespace, name)) {
			n++
		}
	}
	return n
}

// A Cluster is announced once its control plane is initialized and it has an
// endpoint, once however often it changes after that, and again when it is
// deleted and made anew; Clusters in every namespace are announced.
func TestAnnounceOncePerClusterWhenItsControlPlaneIsUp(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	ns := env.Namespace(t, "access")
	other := env.Namespace(t, "access-other")
	out := &printed{}
	done := make(chan error, 1)
	go func() {
		done <- access.Announce(ctx, access.Options{Config: env.Config, Scheme: env.Scheme, Printf: out.Printf})
	}()
	t.Cleanup(func() {
		cancel()
		g.Eventually(done).WithTimeout(30 * time.Second).Should(Receive(BeNil()))
	})

	// Events reach the announcer in the order the apiserver stored them, so
	// once a later Cluster is announced the earlier ones were looked at.
	waiting := newCluster(ns, "waiting")
	g.Expect(env.Client.Create(ctx, waiting)).To(Succeed())
	noEndpoint := newCluster(ns, "no-endpoint")
	g.Expect(env.Client.Create(ctx, noEndpoint)).To(Succeed())
	noEndpoint.Status.Initialization.ControlPlaneInitialized = ptr.To(true)
	g.Expect(env.Client.Status().Update(ctx, noEndpoint)).To(Succeed())
	up := upCluster(ctx, g, other, "up")
	g.Eventually(func() int { return out.About(other, "up") }).WithTimeout(30 * time.Second).Should(Equal(1))
	g.Expect(out.About(ns, "waiting")).To(Equal(0), "a Cluster whose control plane is not initialized is not announced")
	g.Expect(out.About(ns, "no-endpoint")).To(Equal(0), "a Cluster without an endpoint is not announced")
	g.Expect(out.All()).To(HaveExactElements(access.Message(up)), "only what is up is announced, as Message words it")

	// The waiting Cluster comes up: announced once, however often it
	// changes after that.
	waiting.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: "127.0.0.1", Port: 20001}
	g.Expect(env.Client.Update(ctx, waiting)).To(Succeed())
	waiting.Status.Initialization.ControlPlaneInitialized = ptr.To(true)
	g.Expect(env.Client.Status().Update(ctx, waiting)).To(Succeed())
	g.Eventually(func() int { return out.About(ns, "waiting") }).WithTimeout(30 * time.Second).Should(Equal(1))
	waiting.Labels = map[string]string{"changed": "yes"}
	g.Expect(env.Client.Update(ctx, waiting)).To(Succeed())
	upCluster(ctx, g, ns, "later")
	g.Eventually(func() int { return out.About(ns, "later") }).WithTimeout(30 * time.Second).Should(Equal(1))
	g.Expect(out.About(ns, "waiting")).To(Equal(1), "a Cluster is announced once")

	// Deleted and made anew under the same name: announced again.
	g.Expect(env.Client.Delete(ctx, up)).To(Succeed())
	g.Eventually(func() error {
		return env.Client.Get(ctx, client.ObjectKeyFromObject(up), &clusterv1.Cluster{})
	}).WithTimeout(30 * time.Second).ShouldNot(Succeed())
	upCluster(ctx, g, other, "up")
	g.Eventually(func() int { return out.About(other, "up") }).WithTimeout(30 * time.Second).Should(Equal(2))
}

// Announce refuses options it cannot work with rather than printing nothing.
func TestAnnounceRequiresItsOptions(t *testing.T) {
	g := NewWithT(t)
	err := access.Announce(context.Background(), access.Options{Config: env.Config, Printf: func(string, ...any) {}})
	g.Expect(err).To(MatchError(ContainSubstring("Config, Scheme and Printf are required")))
}

// newCluster is a Cluster with neither an endpoint nor an initialized
// control plane (its spec may not be empty).
func newCluster(namespace, name string) *clusterv1.Cluster {
	return &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       clusterv1.ClusterSpec{ClusterNetwork: clusterv1.ClusterNetwork{ServiceDomain: "cluster.local"}},
	}
}

// upCluster creates a Cluster with an endpoint and an initialized control
// plane.
func upCluster(ctx context.Context, g Gomega, namespace, name string) *clusterv1.Cluster {
	c := newCluster(namespace, name)
	c.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: "127.0.0.1", Port: 20000}
	g.Expect(env.Client.Create(ctx, c)).To(Succeed())
	c.Status.Initialization.ControlPlaneInitialized = ptr.To(true)
	g.Expect(env.Client.Status().Update(ctx, c)).To(Succeed())
	return c
}
