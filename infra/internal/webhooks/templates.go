package webhooks

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/capi-monolith/capi-monolith/contracts/dryrun"
)

// isTopologyDryRun tells whether the request is one of the server-side
// apply dry-runs Cluster API's topology controller makes to compute the
// diff between a ClusterClass and a cluster's templates: a dry-run whose
// object carries the topology.cluster.x-k8s.io/dry-run annotation. Those
// persist nothing, and must not fail on immutability (the contract's "SSA
// dry run" rule). A call without an admission request (a direct caller) is
// not one.
func isTopologyDryRun(ctx context.Context, obj metav1.Object) bool {
	return dryrun.IsTopologyDryRun(ctx, obj)
}

func templateImmutable(kind string) *field.Error {
	return field.Forbidden(specPath, fmt.Sprintf(
		"a %s's spec is immutable; create a new template and point the cluster (or its ClusterClass) at it", kind))
}
