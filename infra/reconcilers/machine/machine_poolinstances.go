package machine

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"sigs.k8s.io/cluster-api/util/labels"

	"github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
)

// skipPoolInstances leaves the MonolithMachines of machine pools (labelled
// cluster.x-k8s.io/pool-name, MachinePool Machines) to the machinepool
// module, which provisions them as instances of their pool: whatever event
// enqueued one (its Machine, its Cluster), this controller does nothing
// with it, not even add a finalizer.
type skipPoolInstances struct {
	client client.Client
	next   reconcile.Reconciler
}

func (s skipPoolInstances) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	mm := &v1alpha1.MonolithMachine{}
	if err := s.client.Get(ctx, req.NamespacedName, mm); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("failed to get %s: %w", req.NamespacedName, err)
	}
	if labels.IsMachinePoolOwned(mm) {
		return ctrl.Result{}, nil
	}
	return s.next.Reconcile(ctx, req)
}
