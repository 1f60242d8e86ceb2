package infra_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	infrav1 "github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/test/managertest"
)

// Every write of a MonolithCluster wakes Cluster API core's Cluster
// controller, which at scale answers each with status patches and their
// conflicts. Once Cluster API has set the owner reference, provisioning an
// inMemory cluster writes it three times: the finalizer, the endpoint, and a
// status whose conditions already name the generation the endpoint made,
// so that nothing is left for a later reconcile to write.
func TestInMemoryClusterProvisionsInThreeWrites(t *testing.T) {
	g := NewWithT(t)
	start(t, managertest.Infra())
	ns, err := env.CreateNamespace(ctx, "infra")
	g.Expect(err).NotTo(HaveOccurred())
	cluster, mc := newInMemoryCluster(g, ns.Name, "c1")
	patch := client.MergeFrom(mc.DeepCopy())
	mc.OwnerReferences = ownedBy(cluster, "Cluster")
	g.Expect(env.Client.Patch(ctx, mc, patch)).To(Succeed())

	// Every change after the owner reference, whenever the watch starts.
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	w, err := wc.Watch(ctx, &infrav1.MonolithClusterList{}, client.InNamespace(ns.Name),
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: mc.ResourceVersion}})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(w.Stop)
	var writes []*infrav1.MonolithCluster
	drain := func() int {
		for {
			select {
			case ev := <-w.ResultChan():
				g.Expect(ev.Type).To(Equal(watch.Modified), "%v", ev.Object)
				writes = append(writes, ev.Object.(*infrav1.MonolithCluster))
			default:
				return len(writes)
			}
		}
	}

	g.Eventually(func(g Gomega) {
		g.Expect(drain()).NotTo(BeZero())
		last := writes[len(writes)-1]
		g.Expect(last.Status.Initialization.Provisioned).To(Equal(ptr.To(true)))
		g.Expect(conditions.IsTrue(last, clusterv1.ReadyCondition)).To(BeTrue())
	}, timeout).Should(Succeed())
	g.Consistently(drain, 2*time.Second).Should(Equal(len(writes)), "no write once provisioned")

	g.Expect(writes).To(HaveLen(3), "the finalizer, the endpoint, the status")
	g.Expect(writes[0].Finalizers).To(ContainElement(infrav1.ClusterFinalizer))
	g.Expect(writes[1].Spec.ControlPlaneEndpoint.IsValid()).To(BeTrue())
	last := writes[2]
	for _, c := range last.Status.Conditions {
		g.Expect(c.ObservedGeneration).To(Equal(last.Generation), "condition %s", c.Type)
	}
}
