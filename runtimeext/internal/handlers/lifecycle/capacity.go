package lifecycle

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	ipamv1alpha1 "github.com/capi-monolith/capi-monolith/ipam/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/runtimeext/internal/settings"
	"github.com/capi-monolith/capi-monolith/runtimeext/internal/variables"
)

// capacity blocks while a pool the topology takes addresses from has fewer
// free addresses than the topology's machines need. The first short pool
// is reported.
func (h *Handlers) capacity(ctx context.Context, cluster *clusterv1.Cluster, s settings.Settings) (string, error) {
	if h.Reader == nil || !s.CapacityGate || !cluster.Spec.Topology.IsDefined() {
		return "", nil
	}
	demands, err := variables.AddressDemand(cluster.Spec.Topology)
	if err != nil {
		return "", fmt.Errorf("failed to read the IP pools of the topology: %w", err)
	}
	for _, d := range demands {
		kind, ok := ipamv1alpha1.PoolKindNamed(d.Pool.Kind)
		if !ok {
			return "", fmt.Errorf("IP pool %s: kind must be one of %s", d.Pool, strings.Join(ipamv1alpha1.PoolKindNames(), ", "))
		}
		pool, key := kind.New(), kind.Key(cluster.Namespace, d.Pool.Name)
		if err := h.Reader.Get(ctx, key, pool); err != nil {
			if apierrors.IsNotFound(err) {
				return fmt.Sprintf("IP pool %s does not exist; the topology needs %d addresses from it", d.Pool, d.Addresses), nil
			}
			// The error text (API discovery, cache) is logged, not answered:
			// answers end up in conditions and must not churn.
			ctrl.LoggerFrom(ctx).Error(err, "Failed to read an IP pool", "pool", d.Pool.String())
			return "", fmt.Errorf("failed to read IP pool %s (is the ipam module's CRD installed?); see the extension's logs", d.Pool)
		}
		status := pool.GetStatus().IPAddresses
		if status == nil {
			return fmt.Sprintf("IP pool %s has not reported its free addresses yet; the topology needs %d", d.Pool, d.Addresses), nil
		}
		if status.Free < d.Addresses {
			return fmt.Sprintf("IP pool %s has %d free addresses, the topology needs %d: %d short",
				d.Pool, status.Free, d.Addresses, d.Addresses-status.Free), nil
		}
	}
	return "", nil
}
