// Package dryrun recognises the server-side-apply dry-runs of Cluster API's
// topology controller, which template webhooks must let through whatever
// their immutability rules (the "SSA dry run" rule of the InfraCluster,
// InfraMachine and InfraMachinePool template contracts).
package dryrun

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"sigs.k8s.io/cluster-api/util/topology"
)

// IsTopologyDryRun tells whether the admission request in ctx is one of
// the dry-runs the topology controller makes to compute the diff between a
// ClusterClass and a cluster's templates: a dry-run whose object carries
// the topology.cluster.x-k8s.io/dry-run annotation. Those persist nothing.
// A call without an admission request (a direct caller) is not one.
func IsTopologyDryRun(ctx context.Context, obj metav1.Object) bool {
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return false
	}
	return topology.IsDryRunRequest(req, obj)
}
