package hosting_test

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// goroutinesPerIdleCluster is what a served cluster with no client costs in
// goroutines: its HTTP server's accept loop, which accepts from the TCP
// listener itself (see Hosting.start and connListener). A cluster is served for as long as it exists, so these
// are paid by every cluster of the process, and each holds a stack.
const goroutinesPerIdleCluster = 1

// A served cluster nobody connects to costs at most
// goroutinesPerIdleCluster goroutines, and none once it is no longer
// served.
func TestAServedClusterCostsFewGoroutinesAndLeavesNone(t *testing.T) {
	g := NewWithT(t)
	const n = 10
	h := newHosting(g, freeRange(g, n+1))
	// The goroutines every cluster shares (the controllers' workers, the
	// garbage collector's) start with the first.
	_, err := h.Serve(t.Context(), key("first"), clusterv1.APIEndpoint{})
	g.Expect(err).NotTo(HaveOccurred())
	defer h.Remove(key("first"))
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprint("c", i)
	}
	defer func() {
		for _, k := range keys {
			h.Remove(key(k))
		}
	}()
	before := runtime.NumGoroutine()

	for _, k := range keys {
		_, err := h.Serve(t.Context(), key(k), clusterv1.APIEndpoint{})
		g.Expect(err).NotTo(HaveOccurred())
	}
	// Eventually: goroutines Serve used only while loading may still be
	// ending.
	g.Eventually(func() int { return runtime.NumGoroutine() - before }, 5*time.Second, 10*time.Millisecond).
		Should(BeNumerically("<=", goroutinesPerIdleCluster*n))

	for _, k := range keys {
		h.Remove(key(k))
	}
	g.Eventually(runtime.NumGoroutine, 5*time.Second, 10*time.Millisecond).Should(BeNumerically("<=", before),
		"every goroutine of a cluster ends when it stops being served")
}
