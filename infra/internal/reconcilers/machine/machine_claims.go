package machine

import (
	"context"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/infra/internal/addressclaims"
)

// reconcileClaims makes one IPAddressClaim per pool the machine names and
// returns the addresses once every claim is fulfilled. The claim code is
// shared with the machinepool module's instances (infra/addressclaims).
func (r *Reconciler) reconcileClaims(ctx context.Context, mm *v1alpha1.MonolithMachine, cluster *clusterv1.Cluster) (addressclaims.Result, error) {
	return addressclaims.Reconcile(ctx, r.Client, mm, cluster)
}

// releaseClaims lets the machine's claims go once its node is gone.
func (r *Reconciler) releaseClaims(ctx context.Context, mm *v1alpha1.MonolithMachine) error {
	return addressclaims.Release(ctx, r.Client, mm)
}
