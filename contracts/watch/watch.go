// Package watch holds the event filters and Cluster mappings every module's
// controllers use, so that all of them honour --watch-filter and the pause
// rules the same way.
package watch

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/predicates"
)

// Filter is the event filter of a module's own objects: only objects with
// the watch-filter label (when a value is set) are reconciled.
//
// Paused objects are NOT filtered out here: the reconciler must still see
// them to set the Paused condition (see contracts/scaffold), and it does no
// other work while they are paused.
func Filter(scheme *runtime.Scheme, log logr.Logger, watchFilterValue string) predicate.Funcs {
	return predicates.ResourceHasFilterLabel(scheme, log, watchFilterValue)
}

// ClusterEvents filters the Cluster events that reach a module's controller:
// Clusters with the watch-filter label whose pause state changes, so that
// pausing and unpausing a Cluster pauses and resumes its objects.
func ClusterEvents(scheme *runtime.Scheme, log logr.Logger, watchFilterValue string) predicate.Funcs {
	return predicates.All(scheme, log,
		predicates.ResourceHasFilterLabel(scheme, log, watchFilterValue),
		predicates.ClusterPausedTransitions(scheme, log),
	)
}

// ClusterEventsOrInfrastructureProvisioned is ClusterEvents plus the moment
// the Cluster's infrastructure becomes provisioned, for machine-like objects
// that wait for it.
func ClusterEventsOrInfrastructureProvisioned(scheme *runtime.Scheme, log logr.Logger, watchFilterValue string) predicate.Funcs {
	return predicates.All(scheme, log,
		predicates.ResourceHasFilterLabel(scheme, log, watchFilterValue),
		predicates.ClusterPausedTransitionsOrInfrastructureProvisioned(scheme, log),
	)
}

// ClusterToObjects maps a Cluster to the objects of list's kind in its
// namespace that carry its cluster.x-k8s.io/cluster-name label (machines,
// machine pools, IP address claims).
func ClusterToObjects(c client.Client, list client.ObjectList, scheme *runtime.Scheme) (handler.EventHandler, error) {
	mapper, err := util.ClusterToTypedObjectsMapper(c, list, scheme)
	if err != nil {
		return nil, fmt.Errorf("failed to build the Cluster mapper for %T: %w", list, err)
	}
	return handler.EnqueueRequestsFromMapFunc(mapper), nil
}

// ClusterToInfrastructure maps a Cluster to the infrastructure cluster its
// spec.infrastructureRef names, when that is of gvk's kind.
// Externally managed infrastructure clusters are not mapped.
func ClusterToInfrastructure(ctx context.Context, c client.Client, gvk schema.GroupVersionKind, infraCluster client.Object) handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(util.ClusterToInfrastructureMapFunc(ctx, gvk, c, infraCluster))
}
