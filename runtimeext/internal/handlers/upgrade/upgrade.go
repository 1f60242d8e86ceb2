// Package upgrade answers GenerateUpgradePlan: one control plane step per
// Kubernetes minor between the current and the target version, each the
// highest patch of that minor listed in the Cluster's monolithUpgradeVersions
// variable or the upgradeVersions setting, ending with the target version.
// Worker steps are left to Cluster API, which then picks the fewest.
package upgrade

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/version"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"

	"github.com/capi-monolith/capi-monolith/runtimeext/internal/record"
	"github.com/capi-monolith/capi-monolith/runtimeext/internal/scope"
	"github.com/capi-monolith/capi-monolith/runtimeext/internal/settings"
	"github.com/capi-monolith/capi-monolith/runtimeext/internal/variables"
)

// Handlers answer GenerateUpgradePlan.
type Handlers struct {
	// Recorder records every call; nil records nothing.
	Recorder *record.Recorder
	// Clusters, when set, must know the request's Cluster for the call to
	// become an Event on it (see package scope); the plan itself reads
	// nothing but the request.
	Clusters *scope.Clusters
}

// GenerateUpgradePlan answers the plan described in the package comment, or a
// Failure naming the minor no listed version covers.
func (h *Handlers) GenerateUpgradePlan(ctx context.Context, req *runtimehooksv1.GenerateUpgradePlanRequest, resp *runtimehooksv1.GenerateUpgradePlanResponse) {
	start := time.Now()
	defer func() { h.Recorder.Call("GenerateUpgradePlan", h.eventTarget(ctx, &req.Cluster), resp, start) }()
	steps, err := plan(req)
	if err != nil {
		resp.SetStatus(runtimehooksv1.ResponseStatusFailure)
		resp.SetMessage(err.Error())
		return
	}
	resp.SetStatus(runtimehooksv1.ResponseStatusSuccess)
	for _, s := range steps {
		resp.ControlPlaneUpgrades = append(resp.ControlPlaneUpgrades, runtimehooksv1.UpgradeStep{Version: s})
	}
}

// eventTarget is the stored Cluster an Event may go to, or nil.
func (h *Handlers) eventTarget(ctx context.Context, cluster *clusterv1.Cluster) *clusterv1.Cluster {
	if h.Clusters == nil {
		return cluster
	}
	stored, err := h.Clusters.Resolve(ctx, cluster)
	if err != nil {
		return nil
	}
	return stored
}

func plan(req *runtimehooksv1.GenerateUpgradePlanRequest) ([]string, error) {
	s, err := settings.Parse(req.Settings)
	if err != nil {
		return nil, err
	}
	from, err := version.ParseSemantic(req.FromControlPlaneKubernetesVersion)
	if err != nil {
		return nil, fmt.Errorf("fromControlPlaneKubernetesVersion %q is not a semantic version", req.FromControlPlaneKubernetesVersion)
	}
	to, err := version.ParseSemantic(req.ToKubernetesVersion)
	if err != nil {
		return nil, fmt.Errorf("toKubernetesVersion %q is not a semantic version", req.ToKubernetesVersion)
	}
	if from.Major() != to.Major() {
		return nil, fmt.Errorf("cannot plan an upgrade across major versions (%s to %s)", req.FromControlPlaneKubernetesVersion, req.ToKubernetesVersion)
	}
	if !from.LessThan(to) {
		return nil, fmt.Errorf("toKubernetesVersion %s is not newer than %s", req.ToKubernetesVersion, req.FromControlPlaneKubernetesVersion)
	}
	var listed []string
	if req.Cluster.Spec.Topology.IsDefined() {
		if _, err := variables.Decode(req.Cluster.Spec.Topology.Variables, variables.UpgradeVersions, &listed); err != nil {
			return nil, err
		}
	}
	listed = append(listed, s.UpgradeVersions...)
	// The highest listed patch of each minor.
	best := map[uint]*version.Version{}
	bestRaw := map[uint]string{}
	for _, raw := range listed {
		v, err := version.ParseSemantic(raw)
		if err != nil {
			return nil, fmt.Errorf("upgrade version %q is not a semantic version", raw)
		}
		if v.Major() != from.Major() {
			continue
		}
		if cur, ok := best[v.Minor()]; !ok || cur.LessThan(v) {
			best[v.Minor()], bestRaw[v.Minor()] = v, raw
		}
	}
	var steps []string
	for minor := from.Minor() + 1; minor < to.Minor(); minor++ {
		raw, ok := bestRaw[minor]
		if !ok {
			return nil, fmt.Errorf("no version of Kubernetes %d.%d is known to upgrade through: list one in the %s variable or the %s setting",
				from.Major(), minor, variables.UpgradeVersions, settings.UpgradeVersions)
		}
		steps = append(steps, raw)
	}
	return append(steps, req.ToKubernetesVersion), nil
}
