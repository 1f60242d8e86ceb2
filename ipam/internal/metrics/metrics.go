// Package metrics holds the ipam module's Prometheus metrics, registered on
// the manager's registry so that they are served on its diagnostics
// endpoint with every other controller metric.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/capi-monolith/capi-monolith/ipam/internal/allocator"
	"github.com/capi-monolith/capi-monolith/ipam/internal/index"
)

var (
	// PoolAddresses counts each pool's addresses by state: total, used,
	// free and out_of_range. Values beyond 2^63-1 (IPv6) are capped.
	PoolAddresses = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "capi_monolith_ipam_pool_addresses",
		Help: "Addresses of an IP pool by state (total, used, free, out_of_range).",
	}, []string{"kind", "namespace", "name", "state"})

	// AllocationDuration is the time from a claim first seen by this
	// process to its IPAddress created.
	AllocationDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "capi_monolith_ipam_allocation_duration_seconds",
		Help:    "Time from an IPAddressClaim first seen to its IPAddress created.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
	})
)

func init() {
	metrics.Registry.MustRegister(PoolAddresses, AllocationDuration)
}

// SetPool records a pool's counts.
func SetPool(key index.PoolKey, c allocator.Int64Counts) {
	PoolAddresses.WithLabelValues(key.Kind, key.Namespace, key.Name, "total").Set(float64(c.Total))
	PoolAddresses.WithLabelValues(key.Kind, key.Namespace, key.Name, "used").Set(float64(c.Used))
	PoolAddresses.WithLabelValues(key.Kind, key.Namespace, key.Name, "free").Set(float64(c.Free))
	PoolAddresses.WithLabelValues(key.Kind, key.Namespace, key.Name, "out_of_range").Set(float64(c.OutOfRange))
}

// DeletePool drops a deleted pool's series.
func DeletePool(key index.PoolKey) {
	PoolAddresses.DeletePartialMatch(prometheus.Labels{"kind": key.Kind, "namespace": key.Namespace, "name": key.Name})
}
