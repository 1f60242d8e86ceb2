package claim

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/capi-monolith/capi-monolith/contracts/scaffold"
	"github.com/capi-monolith/capi-monolith/contracts/watch"
	"github.com/capi-monolith/capi-monolith/ipam/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/ipam/internal/index"
	"github.com/capi-monolith/capi-monolith/ipam/internal/ledger"
)

// +kubebuilder:rbac:groups=ipam.cluster.x-k8s.io,resources=ipaddressclaims,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=ipam.cluster.x-k8s.io,resources=ipaddressclaims/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=ipam.cluster.x-k8s.io,resources=ipaddresses,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=ipam.cluster.x-k8s.io,resources=monolithippools;globalmonolithippools,verbs=get;list;watch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=ipam.cluster.x-k8s.io,resources=monolithipallocations,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=ipam.cluster.x-k8s.io,resources=monolithipallocations/status,verbs=get;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconciler fulfils IPAddressClaims from our pools.
type Reconciler struct {
	Client client.Client
	// APIReader reads past the cache: whether a record create that failed
	// committed, whether an address is really taken.
	APIReader        client.Reader
	Ledger           *ledger.Ledger
	WatchFilterValue string
	// Recorder, when set, gets a Warning Event for every claim that cannot
	// be served.
	Recorder events.EventRecorder

	// firstSeen remembers when each unfulfilled claim was first seen, for
	// the allocation latency metric.
	firstSeen sync.Map
	// bound remembers the claims this process bound recently (boundWrite),
	// so that the reconcile caused by the new IPAddress does not write the
	// same status again before the cache shows the first write.
	bound sync.Map
	// backlog holds the claims found settled at start until the queue is
	// nearly empty.
	backlog startupBacklog
}

// SetupWithManager registers the controller.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, options controller.Options) error {
	if r.Client == nil || r.APIReader == nil || r.Ledger == nil {
		return errors.New("claim.Reconciler: Client, APIReader and Ledger are required")
	}
	scaffold, err := scaffold.New(scaffold.OptionsWith[*ipamv1.IPAddressClaim, results]{
		Client:           r.Client,
		NewObject:        func() *ipamv1.IPAddressClaim { return &ipamv1.IPAddressClaim{} },
		Phases:           r,
		Finalizer:        v1alpha1.ReleaseAddressFinalizer,
		GetCluster:       clusterOf,
		WatchFilterValue: r.WatchFilterValue,
		OwnedConditions:  []string{ipamv1.IPAddressClaimReadyCondition},
		// An IPAM provider alone writes a claim's status: one request per
		// status write, not two.
		SoleStatusWriter: true,
	})
	if err != nil {
		return err
	}
	log := ctrl.LoggerFrom(ctx).WithValues("controller", "ipaddressclaim")
	// Pools matter to claims only when their spec or pause state changes;
	// their frequent status updates must not fan out to every claim.
	poolChanged := builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))
	ours := []predicate.Predicate{predicate.NewPredicateFuncs(isOurs), watch.Filter(mgr.GetScheme(), log, r.WatchFilterValue)}
	return ctrl.NewControllerManagedBy(mgr).
		Named("ipaddressclaim").
		For(&ipamv1.IPAddressClaim{}, builder.WithPredicates(append(ours, notSettledAtStart())...)).
		WithOptions(options).
		// A restart finds every bound claim again: their confirming
		// reconciles wait until the queue is nearly empty.
		Watches(&ipamv1.IPAddressClaim{}, r.backlog.handler(), builder.WithPredicates(ours...)).
		Watches(&clusterv1.Cluster{}, r.clusterToClaims(),
			builder.WithPredicates(watch.ClusterEvents(mgr.GetScheme(), log, r.WatchFilterValue))).
		Watches(&ipamv1.IPAddress{}, r.addressEvents()).
		Watches(&v1alpha1.MonolithIPAllocation{}, r.releasedRecordToWaitingClaims()).
		Watches(&ipamv1.IPAddressClaim{}, r.releasedClaimToWaitingClaims(), builder.WithPredicates(predicate.NewPredicateFuncs(isOurs))).
		Watches(&v1alpha1.MonolithIPPool{}, r.poolToWaitingClaims(), poolChanged).
		Watches(&v1alpha1.GlobalMonolithIPPool{}, r.poolToWaitingClaims(), poolChanged).
		Complete(scaffold)
}

func isOurs(o client.Object) bool {
	c, ok := o.(*ipamv1.IPAddressClaim)
	if !ok {
		return false
	}
	_, ours := index.KeyOfRef(c.Spec.PoolRef, c.Namespace)
	return ours
}

// clusterOf finds a claim's Cluster by spec.clusterName, else by the
// cluster-name label. A Cluster that is gone never blocks the release.
func clusterOf(ctx context.Context, c client.Client, claim *ipamv1.IPAddressClaim) (*clusterv1.Cluster, error) {
	name := index.ClusterOfClaim(claim)
	if name == "" {
		return nil, nil
	}
	return scaffold.ClusterByName(ctx, c, claim.Namespace, name)
}

func (r *Reconciler) observeLatency(claim types.NamespacedName) {
	if v, ok := r.firstSeen.LoadAndDelete(claim); ok {
		allocationDuration(time.Since(v.(time.Time)))
	}
}

func poolName(key index.PoolKey) string {
	if key.Namespace == "" {
		return fmt.Sprintf("%s %s", key.Kind, key.Name)
	}
	return fmt.Sprintf("%s %s/%s", key.Kind, key.Namespace, key.Name)
}
