// Package handlers lists every handler the runtime extension serves: its
// stable name (Cluster API registers it as <name>.<ExtensionConfig name>),
// hook, timeout and failure policy, in the order discovery reports them.
package handlers

import (
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	runtimecatalog "sigs.k8s.io/cluster-api/api/runtime/catalog"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
	"sigs.k8s.io/cluster-api/exp/runtime/server"

	"github.com/capi-monolith/capi-monolith/runtimeext/internal/handlers/inplace"
	"github.com/capi-monolith/capi-monolith/runtimeext/internal/handlers/lifecycle"
	"github.com/capi-monolith/capi-monolith/runtimeext/internal/handlers/topology"
	"github.com/capi-monolith/capi-monolith/runtimeext/internal/handlers/upgrade"
	"github.com/capi-monolith/capi-monolith/runtimeext/internal/record"
	"github.com/capi-monolith/capi-monolith/runtimeext/internal/scope"
)

// Options are what the handlers need.
type Options struct {
	// Reader reads IP pools for the capacity gate and the Clusters hook
	// requests name (a hook acts only on a Cluster it finds with the
	// request's UID): the manager's cached client. Nil turns the gate and
	// that check off, for tests.
	Reader client.Reader
	// APIReader reads a hook's Cluster past the cache when the cache does
	// not have it yet (a Cluster created a moment ago): the manager's API
	// reader. Nil trusts the cache alone.
	APIReader client.Reader
	// Recorder records calls; nil records nothing.
	Recorder *record.Recorder
	// Scope are the Clusters the lifecycle policies apply to.
	Scope scope.Scope
	// Nodes reads workload clusters' Nodes for UpdateMachine; nil reports
	// an update done at once, for tests.
	Nodes inplace.NodeVersions
}

// Timeouts the handlers announce. Lifecycle handlers read only the cache;
// topology handlers may see large requests.
const (
	lifecycleTimeoutSeconds = 5
	topologyTimeoutSeconds  = 10
)

// List returns every handler, one per hook of Cluster API v1.14's catalog
// (Discovery is added by the server itself).
func List(opts Options) ([]server.ExtensionHandler, error) {
	// With a reader, hooks act only on Clusters it knows (package scope):
	// the hook paths have no client authentication by default.
	var clusters *scope.Clusters
	if opts.Reader != nil {
		clusters = &scope.Clusters{Reader: opts.Reader, APIReader: opts.APIReader}
	}
	l := &lifecycle.Handlers{Reader: opts.Reader, Recorder: opts.Recorder, Clusters: clusters, Scope: opts.Scope}
	t, err := topology.New(opts.Recorder)
	if err != nil {
		return nil, err
	}
	u := &upgrade.Handlers{Recorder: opts.Recorder, Clusters: clusters}
	i := &inplace.Handlers{Recorder: opts.Recorder, Nodes: opts.Nodes}
	fail, ignore := runtimehooksv1.FailurePolicyFail, runtimehooksv1.FailurePolicyIgnore
	h := func(name string, hook, fn runtimecatalog.Hook, timeout int32, policy runtimehooksv1.FailurePolicy) server.ExtensionHandler {
		return server.ExtensionHandler{Name: name, Hook: hook, HandlerFunc: fn, TimeoutSeconds: ptr.To(timeout), FailurePolicy: ptr.To(policy)}
	}
	list := []server.ExtensionHandler{
		// Blocking lifecycle hooks are gates: when the extension cannot
		// answer, Cluster API waits rather than passing the gate.
		h("before-cluster-create", runtimehooksv1.BeforeClusterCreate, l.BeforeClusterCreate, lifecycleTimeoutSeconds, fail),
		h("after-control-plane-initialized", runtimehooksv1.AfterControlPlaneInitialized, l.AfterControlPlaneInitialized, lifecycleTimeoutSeconds, ignore),
		h("before-cluster-upgrade", runtimehooksv1.BeforeClusterUpgrade, l.BeforeClusterUpgrade, lifecycleTimeoutSeconds, fail),
		h("before-control-plane-upgrade", runtimehooksv1.BeforeControlPlaneUpgrade, l.BeforeControlPlaneUpgrade, lifecycleTimeoutSeconds, fail),
		h("after-control-plane-upgrade", runtimehooksv1.AfterControlPlaneUpgrade, l.AfterControlPlaneUpgrade, lifecycleTimeoutSeconds, fail),
		h("before-workers-upgrade", runtimehooksv1.BeforeWorkersUpgrade, l.BeforeWorkersUpgrade, lifecycleTimeoutSeconds, fail),
		h("after-workers-upgrade", runtimehooksv1.AfterWorkersUpgrade, l.AfterWorkersUpgrade, lifecycleTimeoutSeconds, fail),
		h("after-cluster-upgrade", runtimehooksv1.AfterClusterUpgrade, l.AfterClusterUpgrade, lifecycleTimeoutSeconds, fail),
		h("before-cluster-delete", runtimehooksv1.BeforeClusterDelete, l.BeforeClusterDelete, lifecycleTimeoutSeconds, fail),
		h("generate-patches", runtimehooksv1.GeneratePatches, t.GeneratePatches, topologyTimeoutSeconds, fail),
		h("validate-topology", runtimehooksv1.ValidateTopology, t.ValidateTopology, topologyTimeoutSeconds, fail),
		h("discover-variables", runtimehooksv1.DiscoverVariables, t.DiscoverVariables, topologyTimeoutSeconds, fail),
		h("generate-upgrade-plan", runtimehooksv1.GenerateUpgradePlan, u.GenerateUpgradePlan, topologyTimeoutSeconds, fail),
		// A failed in-place check makes Cluster API fall back to a rollout,
		// which is always safe.
		h("can-update-machine", runtimehooksv1.CanUpdateMachine, i.CanUpdateMachine, lifecycleTimeoutSeconds, ignore),
		h("can-update-machine-set", runtimehooksv1.CanUpdateMachineSet, i.CanUpdateMachineSet, lifecycleTimeoutSeconds, ignore),
		h("update-machine", runtimehooksv1.UpdateMachine, i.UpdateMachine, topologyTimeoutSeconds, fail),
	}
	return list, nil
}
