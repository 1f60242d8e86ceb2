package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"

	"github.com/capi-monolith/capi-monolith/runtimeext/api"
	"github.com/capi-monolith/capi-monolith/runtimeext/internal/record"
	"github.com/capi-monolith/capi-monolith/runtimeext/internal/scope"
	"github.com/capi-monolith/capi-monolith/runtimeext/internal/settings"
)

// Handlers answer the lifecycle hooks.
type Handlers struct {
	// Reader reads IP pools; the manager's cached client, so that no call
	// reaches the apiserver. Nil turns the capacity gate off.
	Reader client.Reader
	// Recorder records every call; nil records nothing.
	Recorder *record.Recorder
	// Scope are the Clusters the policies apply to (--namespace,
	// --watch-filter); a call about another Cluster gets the neutral
	// answer: success, nothing held, no Event.
	Scope scope.Scope
	// Clusters, when set, must know the request's Cluster (namespace, name
	// and UID) for a hook to act on it, in the cache or past it: policies
	// and Events then use the stored Cluster, and a Cluster that does not
	// exist answers a Failure with no Event and no pool read (see package
	// scope); one that cannot be read is asked again (RetryAfterSeconds)
	// by blocking hooks. Nil trusts requests, for tests of the policies
	// alone.
	Clusters *scope.Clusters
}

// failer is the part of a response resolve answers a Failure with.
type failer interface {
	SetStatus(runtimehooksv1.ResponseStatus)
	SetMessage(string)
}

// resolve returns the Cluster to act on, or nil after answering (a
// Failure, or a retry for a Cluster that could not be read).
func (h *Handlers) resolve(ctx context.Context, cluster *clusterv1.Cluster, resp failer) *clusterv1.Cluster {
	if h.Clusters == nil {
		return cluster
	}
	stored, err := h.Clusters.Resolve(ctx, cluster)
	if err == nil {
		return stored
	}
	if errors.Is(err, scope.ErrNotInScope) {
		resp.SetStatus(runtimehooksv1.ResponseStatusFailure)
		resp.SetMessage(err.Error())
		return nil
	}
	// Read errors are logged, not answered (see capacity). They are
	// transient: a blocking hook is asked again later rather than failed,
	// so that a Cluster being created is not refused by a hiccup.
	ctrl.LoggerFrom(ctx).Error(err, "Failed to read the request's Cluster", "Cluster", klog.KObj(cluster))
	resp.SetMessage("failed to read the request's Cluster; see the extension's logs")
	if r, ok := resp.(retrier); ok {
		resp.SetStatus(runtimehooksv1.ResponseStatusSuccess)
		r.SetRetryAfterSeconds(unreadClusterRetrySeconds)
		return nil
	}
	resp.SetStatus(runtimehooksv1.ResponseStatusFailure)
	return nil
}

// retrier is a blocking hook's response, which can ask to be called again.
type retrier interface {
	SetRetryAfterSeconds(int32)
}

// unreadClusterRetrySeconds is when a blocking hook whose Cluster could not
// be read asks to be called again.
const unreadClusterRetrySeconds = 5

// policy may block a hook: it returns a message when it does, "" otherwise.
type policy func(ctx context.Context, cluster *clusterv1.Cluster, s settings.Settings) (string, error)

func (h *Handlers) blocking(ctx context.Context, hook string, cluster *clusterv1.Cluster, raw map[string]string, resp *runtimehooksv1.CommonRetryResponse, policies ...policy) {
	start := time.Now()
	log := ctrl.LoggerFrom(ctx).WithValues("hook", hook, "Cluster", klog.KObj(cluster))
	ctx = ctrl.LoggerInto(ctx, log)
	// The deferred call reads cluster when it runs: nil (no Event) for a
	// Cluster out of scope, the stored one otherwise.
	defer func() { h.Recorder.Call(hook, cluster, resp, start) }()
	// Out of scope as the request says, or as the stored Cluster says.
	if !h.Scope.Covers(cluster) {
		log.V(4).Info("Cluster outside the watched namespace or watch filter: neutral answer")
		resp.SetStatus(runtimehooksv1.ResponseStatusSuccess)
		return
	}
	if cluster = h.resolve(ctx, cluster, resp); cluster == nil {
		return
	}
	if !h.Scope.Covers(cluster) {
		log.V(4).Info("Cluster outside the watched namespace or watch filter: neutral answer")
		resp.SetStatus(runtimehooksv1.ResponseStatusSuccess)
		return
	}
	s, err := settings.Parse(raw)
	if err != nil {
		resp.SetStatus(runtimehooksv1.ResponseStatusFailure)
		resp.SetMessage(err.Error())
		return
	}
	resp.SetStatus(runtimehooksv1.ResponseStatusSuccess)
	policies = append([]policy{hold(hook)}, policies...)
	for _, p := range policies {
		msg, err := p(ctx, cluster, s)
		if err != nil {
			log.Error(err, "Policy failed")
			resp.SetStatus(runtimehooksv1.ResponseStatusFailure)
			resp.SetMessage(err.Error())
			return
		}
		if msg != "" {
			log.V(2).Info("Hook blocked", "reason", msg)
			resp.SetRetryAfterSeconds(s.RetryAfterSeconds)
			resp.SetMessage(msg)
			return
		}
	}
}

func (h *Handlers) nonBlocking(ctx context.Context, hook string, cluster *clusterv1.Cluster, raw map[string]string, resp *runtimehooksv1.CommonResponse) {
	start := time.Now()
	defer func() { h.Recorder.Call(hook, cluster, resp, start) }()
	if !h.Scope.Covers(cluster) {
		resp.SetStatus(runtimehooksv1.ResponseStatusSuccess)
		return
	}
	if cluster = h.resolve(ctx, cluster, resp); cluster == nil {
		return
	}
	if !h.Scope.Covers(cluster) {
		resp.SetStatus(runtimehooksv1.ResponseStatusSuccess)
		return
	}
	if _, err := settings.Parse(raw); err != nil {
		resp.SetStatus(runtimehooksv1.ResponseStatusFailure)
		resp.SetMessage(err.Error())
		return
	}
	resp.SetStatus(runtimehooksv1.ResponseStatusSuccess)
}

// Held returns the hooks the hold annotation of cluster lists.
func Held(cluster *clusterv1.Cluster) []string {
	v, ok := cluster.GetAnnotations()[api.HoldAnnotation]
	if !ok {
		return nil
	}
	var held []string
	for _, part := range strings.Split(v, ",") {
		if part = strings.TrimSpace(part); part != "" {
			held = append(held, part)
		}
	}
	return held
}

func hold(hook string) policy {
	return func(_ context.Context, cluster *clusterv1.Cluster, _ settings.Settings) (string, error) {
		if slices.ContainsFunc(Held(cluster), func(h string) bool { return strings.EqualFold(h, hook) }) {
			return fmt.Sprintf("%s is held by the %s annotation on the Cluster; remove %s from it to proceed", hook, api.HoldAnnotation, hook), nil
		}
		return "", nil
	}
}

// BeforeClusterCreate is held, and waits for IP capacity.
func (h *Handlers) BeforeClusterCreate(ctx context.Context, req *runtimehooksv1.BeforeClusterCreateRequest, resp *runtimehooksv1.BeforeClusterCreateResponse) {
	h.blocking(ctx, "BeforeClusterCreate", &req.Cluster, req.Settings, &resp.CommonRetryResponse, h.capacity)
}

// AfterControlPlaneInitialized records the call; it cannot block.
func (h *Handlers) AfterControlPlaneInitialized(ctx context.Context, req *runtimehooksv1.AfterControlPlaneInitializedRequest, resp *runtimehooksv1.AfterControlPlaneInitializedResponse) {
	h.nonBlocking(ctx, "AfterControlPlaneInitialized", &req.Cluster, req.Settings, &resp.CommonResponse)
}

// BeforeClusterUpgrade can be held.
func (h *Handlers) BeforeClusterUpgrade(ctx context.Context, req *runtimehooksv1.BeforeClusterUpgradeRequest, resp *runtimehooksv1.BeforeClusterUpgradeResponse) {
	h.blocking(ctx, "BeforeClusterUpgrade", &req.Cluster, req.Settings, &resp.CommonRetryResponse)
}

// BeforeControlPlaneUpgrade can be held.
func (h *Handlers) BeforeControlPlaneUpgrade(ctx context.Context, req *runtimehooksv1.BeforeControlPlaneUpgradeRequest, resp *runtimehooksv1.BeforeControlPlaneUpgradeResponse) {
	h.blocking(ctx, "BeforeControlPlaneUpgrade", &req.Cluster, req.Settings, &resp.CommonRetryResponse)
}

// AfterControlPlaneUpgrade can be held.
func (h *Handlers) AfterControlPlaneUpgrade(ctx context.Context, req *runtimehooksv1.AfterControlPlaneUpgradeRequest, resp *runtimehooksv1.AfterControlPlaneUpgradeResponse) {
	h.blocking(ctx, "AfterControlPlaneUpgrade", &req.Cluster, req.Settings, &resp.CommonRetryResponse)
}

// BeforeWorkersUpgrade can be held.
func (h *Handlers) BeforeWorkersUpgrade(ctx context.Context, req *runtimehooksv1.BeforeWorkersUpgradeRequest, resp *runtimehooksv1.BeforeWorkersUpgradeResponse) {
	h.blocking(ctx, "BeforeWorkersUpgrade", &req.Cluster, req.Settings, &resp.CommonRetryResponse)
}

// AfterWorkersUpgrade can be held.
func (h *Handlers) AfterWorkersUpgrade(ctx context.Context, req *runtimehooksv1.AfterWorkersUpgradeRequest, resp *runtimehooksv1.AfterWorkersUpgradeResponse) {
	h.blocking(ctx, "AfterWorkersUpgrade", &req.Cluster, req.Settings, &resp.CommonRetryResponse)
}

// AfterClusterUpgrade can be held.
func (h *Handlers) AfterClusterUpgrade(ctx context.Context, req *runtimehooksv1.AfterClusterUpgradeRequest, resp *runtimehooksv1.AfterClusterUpgradeResponse) {
	h.blocking(ctx, "AfterClusterUpgrade", &req.Cluster, req.Settings, &resp.CommonRetryResponse)
}

// BeforeClusterDelete can be held.
func (h *Handlers) BeforeClusterDelete(ctx context.Context, req *runtimehooksv1.BeforeClusterDeleteRequest, resp *runtimehooksv1.BeforeClusterDeleteResponse) {
	h.blocking(ctx, "BeforeClusterDelete", &req.Cluster, req.Settings, &resp.CommonRetryResponse)
}
