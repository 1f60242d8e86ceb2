// Package instances is the machinepool module's owner adapter for infra's
// one MonolithMachine controller: it answers, for a MonolithMachine that is
// the instance of a MonolithMachinePool (labelled
// cluster.x-k8s.io/pool-name), what its MachinePool says of the node to make
// (bootstrap data, version; never a control plane node), and enqueues a
// pool's instances when its MachinePool changes.
package instances

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/labels"
	"sigs.k8s.io/cluster-api/util/labels/format"

	infrav1 "github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/infra/machines"
	"github.com/capi-monolith/capi-monolith/machinepool/api/v1alpha1"
)

// The adapter reads the instances' MachinePools.
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machinepools,verbs=get;list;watch

// Owner is the MachinePool owner adapter.
type Owner struct {
	// Client reads through the shared cache.
	Client client.Client
}

var _ machines.Owner = Owner{}

// Kind implements machines.Owner.
func (Owner) Kind() string { return "MachinePool" }

// Owns implements machines.Owner: pool instances carry the pool-name label.
func (Owner) Owns(mm *infrav1.MonolithMachine) bool { return labels.IsMachinePoolOwned(mm) }

// LegacyFinalizers implements machines.Owner: releases before the one
// machine controller had a second controller for instances, with a
// finalizer of its own that stored instances may still carry.
func (Owner) LegacyFinalizers() []string { return []string{v1alpha1.InstanceFinalizer} }

// Get implements machines.Owner. An instance's Kubernetes version is the one
// it was created for (VersionAnnotation, so that a rollout replaces rather
// than changes it), else the MachinePool's.
func (o Owner) Get(ctx context.Context, mm *infrav1.MonolithMachine) (machines.Facts, error) {
	mp, err := util.GetMachinePoolByLabels(ctx, o.Client, mm.Namespace, mm.Labels)
	if err != nil {
		return machines.Facts{}, fmt.Errorf("failed to get the instance's MachinePool: %w", err)
	}
	if mp == nil {
		return machines.Facts{WaitingReason: v1alpha1.WaitingForMachinePoolReason}, nil
	}
	version := mm.Annotations[v1alpha1.VersionAnnotation]
	if version == "" {
		version = mp.Spec.Template.Spec.Version
	}
	return machines.Facts{
		Found:               true,
		BootstrapDataSecret: mp.Spec.Template.Spec.Bootstrap.DataSecretName,
		Version:             version,
	}, nil
}

// Source enqueues the instances of a MachinePool whose bootstrap data or
// version changed. The controller checks the instance's watch-filter label;
// the MachinePool need not carry it.
func (o Owner) Source(mgr ctrl.Manager) source.Source {
	return source.Kind(mgr.GetCache(), &clusterv1.MachinePool{},
		handler.TypedEnqueueRequestsFromMapFunc(o.machinePoolToInstances))
}

func (o Owner) machinePoolToInstances(ctx context.Context, mp *clusterv1.MachinePool) []reconcile.Request {
	list := &infrav1.MonolithMachineList{}
	if err := o.Client.List(ctx, list, client.InNamespace(mp.Namespace), client.MatchingLabels{
		clusterv1.ClusterNameLabel:     mp.Spec.ClusterName,
		clusterv1.MachinePoolNameLabel: format.MustFormatValue(mp.Name),
	}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Failed to list the instances to reconcile")
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: mp.Namespace, Name: list.Items[i].Name}})
	}
	return reqs
}
