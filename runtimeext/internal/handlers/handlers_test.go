package handlers_test

import (
	"slices"
	"testing"

	. "github.com/onsi/gomega"

	runtimecatalog "sigs.k8s.io/cluster-api/api/runtime/catalog"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"

	"github.com/capi-monolith/capi-monolith/runtimeext/internal/handlers"
)

// An outage of the extension must not stop what does not wait for it: a
// lifecycle hook that cannot ask Cluster API to retry (non-blocking) fails
// open. Blocking lifecycle hooks are gates and fail closed; topology hooks
// are named by a ClusterClass and must not be skipped.
func TestNonBlockingLifecycleHooksFailOpen(t *testing.T) {
	g := NewWithT(t)
	catalog := runtimecatalog.New()
	g.Expect(runtimehooksv1.AddToCatalog(catalog)).To(Succeed())
	known := catalog.AllKnownHooks()
	list, err := handlers.List(handlers.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	var nonBlocking []string
	for _, h := range list {
		gvh, err := catalog.GroupVersionHook(h.Hook)
		g.Expect(err).NotTo(HaveOccurred())
		if !slices.Contains(known[gvh].Metadata.Tags, "Lifecycle Hooks") {
			continue
		}
		resp, err := catalog.NewResponse(gvh)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(h.FailurePolicy).NotTo(BeNil(), h.Name)
		if _, blocking := resp.(runtimehooksv1.RetryResponseObject); blocking {
			g.Expect(*h.FailurePolicy).To(Equal(runtimehooksv1.FailurePolicyFail), "blocking hook %s", h.Name)
			continue
		}
		nonBlocking = append(nonBlocking, h.Name)
		g.Expect(*h.FailurePolicy).To(Equal(runtimehooksv1.FailurePolicyIgnore), "non-blocking hook %s", h.Name)
	}
	g.Expect(nonBlocking).To(ConsistOf("after-control-plane-initialized"))
}
