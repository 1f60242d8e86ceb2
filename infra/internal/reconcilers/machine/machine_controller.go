// Package machine reconciles MonolithMachines, Cluster API's infrastructure
// machines of capi-monolith, whether a Machine owns them or they are the
// instances of a MonolithMachinePool (an Owner adapter registered by the
// machinepool module says what differs). In order: wait for the cluster's
// infrastructure and the owner's bootstrap data; claim the addresses the machine asks of
// IP pools and wait for them; create the node through the backend and
// report its provider ID and addresses; run the bootstrap data on it as a
// background task. Deletion cancels the task, deletes the node, then
// releases the claims.
package machine

import (
	"context"
	"errors"
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util"

	"github.com/capi-monolith/capi-monolith/contracts/scaffold"
	"github.com/capi-monolith/capi-monolith/contracts/watch"
	"github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/infra/internal/addressclaims"
	"github.com/capi-monolith/capi-monolith/infra/internal/backend"
	"github.com/capi-monolith/capi-monolith/infra/internal/tasks"
)

// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=monolithmachines,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=monolithmachines/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=monolithclusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters;clusters/status;machines;machines/status,verbs=get;list;watch
// +kubebuilder:rbac:groups=ipam.cluster.x-k8s.io,resources=ipaddressclaims,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=ipam.cluster.x-k8s.io,resources=ipaddresses,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get

// Reconciler reconciles MonolithMachines, whatever owns them: the one
// controller of the kind, with one finalizer and one status writer. What
// differs between owners is asked of an Owner (see RegisterOwner).
type Reconciler struct {
	// Client reads through the shared cache; Secrets bypass it.
	Client           client.Client
	Backends         backend.Set
	Tasks            *tasks.Manager
	WatchFilterValue string

	owners     owners
	controller controller.Controller
}

// RegisterOwner adds an owner adapter, and sources enqueuing the
// MonolithMachines its owner objects concern. Call it after SetupWithManager
// and before the manager starts.
func (r *Reconciler) RegisterOwner(owner Owner, sources ...source.Source) error {
	if r.controller == nil {
		return errors.New("machine.Reconciler: RegisterOwner before SetupWithManager")
	}
	r.owners.add(owner)
	for _, src := range sources {
		if err := r.controller.Watch(src); err != nil {
			return fmt.Errorf("failed to watch for the %s owner: %w", owner.Kind(), err)
		}
	}
	return nil
}

// SetupWithManager registers the controller.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, options controller.Options) error {
	if r.Client == nil || r.Tasks == nil {
		return errors.New("machine.Reconciler: Client and Tasks are required")
	}
	scaffold, err := r.scaffold()
	if err != nil {
		return err
	}
	log := ctrl.LoggerFrom(ctx).WithValues("controller", "monolithmachine")
	clusterToMachines, err := watch.ClusterToObjects(mgr.GetClient(), &v1alpha1.MonolithMachineList{}, mgr.GetScheme())
	if err != nil {
		return err
	}
	c, err := ctrl.NewControllerManagedBy(mgr).
		Named("monolithmachine").
		For(&v1alpha1.MonolithMachine{}, builder.WithPredicates(watch.Filter(mgr.GetScheme(), log, r.WatchFilterValue))).
		WithOptions(options).
		Watches(&clusterv1.Machine{},
			handler.EnqueueRequestsFromMapFunc(util.MachineToInfrastructureMapFunc(v1alpha1.GroupVersion.WithKind("MonolithMachine"))),
			builder.WithPredicates(watch.Filter(mgr.GetScheme(), log, r.WatchFilterValue))).
		Watches(&clusterv1.Cluster{}, clusterToMachines,
			builder.WithPredicates(watch.ClusterEventsOrInfrastructureProvisioned(mgr.GetScheme(), log, r.WatchFilterValue))).
		Owns(&ipamv1.IPAddressClaim{}).
		Watches(&ipamv1.IPAddress{}, handler.EnqueueRequestsFromMapFunc(addressclaims.MachineOfAddress(mgr.GetClient()))).
		WatchesRawSource(r.Tasks.Source()).
		Build(scaffold)
	if err != nil {
		return err
	}
	r.controller = c
	return nil
}

// scaffold is the contract scaffold running the phases: one finalizer and
// one status writer for every MonolithMachine, whatever its owner.
func (r *Reconciler) scaffold() (*scaffold.ReconcilerWith[*v1alpha1.MonolithMachine, results], error) {
	r.owners.setBuiltin(machineOwner{client: r.Client})
	return scaffold.New(scaffold.OptionsWith[*v1alpha1.MonolithMachine, results]{
		Client:           r.Client,
		NewObject:        func() *v1alpha1.MonolithMachine { return &v1alpha1.MonolithMachine{} },
		Phases:           r,
		Finalizer:        v1alpha1.MachineFinalizer,
		BeforeFinalizer:  r.BeforeFinalizer,
		WaitsForOwner:    r.waitsForOwnerMachine,
		GetCluster:       scaffold.ClusterFromLabel[*v1alpha1.MonolithMachine],
		RequireCluster:   true,
		WatchFilterValue: r.WatchFilterValue,
		OwnedConditions: []string{clusterv1.ReadyCondition, v1alpha1.BackendMachineProvisionedCondition,
			v1alpha1.BootstrapExecSucceededCondition, v1alpha1.IPAddressesClaimedCondition, v1alpha1.WorkloadNodeProviderIDSetCondition},
		// Only this controller writes a MonolithMachine's status (Cluster
		// API core reads it): status and conditions go in one request, not
		// two. Measured by `make bench-scale`: 6 → 5 requests per machine (3
		// since, see BeforeFinalizer and backend.QuickBootstrapper),
		// and each request saved is also a watch event every informer of
		// the kind no longer decodes.
		SoleStatusWriter: true,
	})
}
