// Package scope says which Clusters the runtime extension answers for: those
// the manager watches (--namespace) and whose cluster.x-k8s.io/watch-filter
// label matches --watch-filter, as every controller of the binary does. A
// hook call about a Cluster outside the scope gets the hook's neutral answer
// (success, nothing held or blocked) and records no Event: another instance
// of the provider, watching that namespace or label, owns it.
package scope

import (
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// Scope is the part of the management cluster a manager is responsible for.
// The zero value covers everything.
type Scope struct {
	// Namespace is the only namespace in scope; empty means all.
	Namespace string
	// WatchFilterValue is the value of the cluster.x-k8s.io/watch-filter
	// label a Cluster must carry; empty means any.
	WatchFilterValue string
}

// Covers reports whether the Cluster is in scope. A nil Cluster (a hook that
// names none) is.
func (s Scope) Covers(cluster *clusterv1.Cluster) bool {
	if cluster == nil {
		return true
	}
	if s.Namespace != "" && cluster.Namespace != s.Namespace {
		return false
	}
	if s.WatchFilterValue != "" && cluster.GetLabels()[clusterv1.WatchLabel] != s.WatchFilterValue {
		return false
	}
	return true
}
