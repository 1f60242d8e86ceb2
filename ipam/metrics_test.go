package ipam_test

import (
	"testing"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/capi-monolith/capi-monolith/ipam/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/ipam/internal/metrics"
)

func TestPoolUsageAndAllocationLatencyAreExported(t *testing.T) {
	g := NewWithT(t)
	startIPAM(t)
	ns := namespace(t)
	createPool(t, ns, "metered", spec(24, "10.80.0.10-10.80.0.19", "10.80.0.200"))
	for i := range 3 {
		addressOf(t, createClaim(t, ns, claimName(i), "metered"))
	}
	gauge := func(state string) float64 {
		return testutil.ToFloat64(metrics.PoolAddresses.WithLabelValues(v1alpha1.MonolithIPPoolKind, ns, "metered", state))
	}
	g.Eventually(func(g Gomega) {
		g.Expect(gauge("total")).To(Equal(11.0))
		g.Expect(gauge("used")).To(Equal(3.0))
		g.Expect(gauge("free")).To(Equal(8.0))
		g.Expect(gauge("out_of_range")).To(Equal(0.0))
	}, timeout).Should(Succeed())

	// Served from the manager's registry, with every controller metric.
	families, err := ctrlmetrics.Registry.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	var samples uint64
	for _, f := range families {
		if f.GetName() == "capi_monolith_ipam_allocation_duration_seconds" {
			samples = f.GetMetric()[0].GetHistogram().GetSampleCount()
		}
	}
	g.Expect(samples).To(BeNumerically(">=", 3), "one latency sample per fulfilled claim")
}
