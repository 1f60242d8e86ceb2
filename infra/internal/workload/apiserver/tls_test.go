package apiserver

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
)

func TestOnlyClientsTheClusterCASignedAreServed(t *testing.T) {
	g := NewWithT(t)
	ts := startServer(t, store.Options{}, "c1", "c2")
	ctx := context.Background()

	good, err := kubernetes.NewForConfig(ts.restConfig(t, "c1"))
	g.Expect(err).NotTo(HaveOccurred())
	_, err = good.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	served := ts.faults.served()

	// A certificate another CA signed: a stranger's.
	stranger := ts.restConfig(t, "c1")
	stranger.CertData, stranger.KeyData = newCA(t, "stranger-ca").clientCert(t)
	cs, err := kubernetes.NewForConfig(stranger)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	g.Expect(err).To(HaveOccurred())

	// A certificate of another cluster's CA, on this cluster's name.
	crossed := ts.restConfig(t, "c1")
	crossed.CertData, crossed.KeyData = ts.clusters["c2"].ca.clientCert(t)
	cs, err = kubernetes.NewForConfig(crossed)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	g.Expect(err).To(HaveOccurred())

	// No certificate at all.
	anonymous := ts.restConfig(t, "c1")
	anonymous.CertData, anonymous.KeyData = nil, nil
	cs, err = kubernetes.NewForConfig(anonymous)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	g.Expect(err).To(HaveOccurred())

	// A server name no cluster has.
	unknown := ts.restConfig(t, "c1")
	unknown.ServerName = "nobody"
	cs, err = kubernetes.NewForConfig(unknown)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	g.Expect(err).To(HaveOccurred())

	// None of them got a request through to the handler.
	g.Expect(ts.faults.served()).To(Equal(served))
}

func TestARemovedClusterIsNoLongerServed(t *testing.T) {
	g := NewWithT(t)
	ts := startServer(t, store.Options{}, "c1", "c2")
	ctx := context.Background()
	c1, c2 := clientset(t, ts, "c1"), clientset(t, ts, "c2")
	w, err := c1.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	defer w.Stop()

	ts.served.Remove("c1")
	g.Eventually(w.ResultChan(), 10*time.Second).Should(BeClosed(), "its watches end")
	_, err = c1.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	g.Expect(err).To(HaveOccurred(), "its requests fail")
	_, err = c2.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	g.Expect(err).NotTo(HaveOccurred(), "the other cluster is still served")
}
