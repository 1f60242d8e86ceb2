package machines

import (
	"context"
	"errors"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/source"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/infra/internal/addressclaims"
	"github.com/capi-monolith/capi-monolith/infra/internal/clusters"
	"github.com/capi-monolith/capi-monolith/infra/internal/reconcilers/machine"
	"github.com/capi-monolith/capi-monolith/infra/internal/webhooks"
)

// Owner answers what differs between the kinds of objects a MonolithMachine
// may be the infrastructure of (bootstrap data, version, control plane or
// not); see Controller.RegisterOwner.
type Owner = machine.Owner

// Facts are what an Owner says about the node to make.
type Facts = machine.Facts

// ErrNotMonolithCluster is wrapped by MonolithClusterOf's error for a
// Cluster whose infrastructure is another provider's.
var ErrNotMonolithCluster = clusters.ErrNotMonolithCluster

// ErrNotSetUp is wrapped by Controller.RegisterOwner's error when the infra
// module is not set up on the manager given (not enabled, or not yet).
var ErrNotSetUp = errors.New("the MonolithMachine controller is not set up on this manager")

// Controller is the one MonolithMachine controller of a manager, as the
// infra module hands it to the modules whose objects own MonolithMachines.
// The infra module makes it when it is built and binds it to the machine
// reconciler it sets up on a manager; other modules register their Owner
// adapters with it after that, on the same manager.
type Controller struct {
	mu         sync.Mutex
	mgr        ctrl.Manager
	reconciler *machine.Reconciler
}

// NewController returns a controller bound to no manager yet. For the infra
// module.
func NewController() *Controller { return &Controller{} }

// Bind makes r, set up on mgr, the reconciler behind c. For the infra
// module; a later Bind (the module set up on another manager) replaces it.
func (c *Controller) Bind(mgr ctrl.Manager, r *machine.Reconciler) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mgr, c.reconciler = mgr, r
}

// RegisterOwner adds the adapter of a kind of owner, and sources that
// enqueue the MonolithMachines its owner objects concern (for example a
// MachinePool whose bootstrap data changed), to the controller set up on
// mgr. Call it while setting up a module, after the infra module was set up
// on the same manager and before the manager starts.
func (c *Controller) RegisterOwner(mgr ctrl.Manager, owner Owner, sources ...source.Source) error {
	c.mu.Lock()
	r := c.reconciler
	bound := r != nil && c.mgr == mgr
	c.mu.Unlock()
	if !bound {
		return ErrNotSetUp
	}
	return r.RegisterOwner(owner, sources...)
}

// MonolithClusterOf returns the MonolithCluster that cluster's
// spec.infrastructureRef names; nil and no error while it does not exist,
// and an error wrapping ErrNotMonolithCluster when the infrastructure is not
// a MonolithCluster.
func MonolithClusterOf(ctx context.Context, c client.Reader, cluster *clusterv1.Cluster) (*v1alpha1.MonolithCluster, error) {
	return clusters.MonolithClusterOf(ctx, c, cluster)
}

// ValidateMachine reports every problem of a machine's backend and address
// pools, as the MonolithMachine webhook does, with paths under path (whose
// children are backend and addressesFromPools).
func ValidateMachine(b *v1alpha1.MachineBackend, pools []corev1.TypedLocalObjectReference, path *field.Path) field.ErrorList {
	return webhooks.ValidateMachine(b, pools, path)
}

// ClaimName is the name of the IPAddressClaim a machine makes of its
// index-th address pool.
func ClaimName(machine string, index int) string { return addressclaims.ClaimName(machine, index) }
