package machines

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/source"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/infra/internal/addressclaims"
	"github.com/capi-monolith/capi-monolith/infra/internal/backend"
	"github.com/capi-monolith/capi-monolith/infra/internal/clusters"
	"github.com/capi-monolith/capi-monolith/infra/internal/reconcilers/machine"
	"github.com/capi-monolith/capi-monolith/infra/internal/tasks"
	"github.com/capi-monolith/capi-monolith/infra/internal/webhooks"
	"github.com/capi-monolith/capi-monolith/modules"
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

// Services are the machine services of one manager, built once by the infra
// module and shared by every module that provisions machines.
type Services struct {
	// Backends are the one docker and one inMemory backend of the process:
	// one inMemory backend sees every node of a cluster, whoever owns it.
	Backends backend.Set
	// Tasks run the bootstrap of every node.
	Tasks *tasks.Manager
	// Controller is the one MonolithMachine controller.
	Controller *Controller
}

// Controller is the one MonolithMachine controller of the manager.
type Controller struct {
	reconciler *machine.Reconciler
}

// NewController wraps the set-up machine reconciler. For the infra module.
func NewController(r *machine.Reconciler) *Controller { return &Controller{reconciler: r} }

// RegisterOwner adds the adapter of a kind of owner, and sources that
// enqueue the MonolithMachines its owner objects concern (for example a
// MachinePool whose bootstrap data changed). Call it while setting up a
// module, before the manager starts.
func (c *Controller) RegisterOwner(owner Owner, sources ...source.Source) error {
	return c.reconciler.RegisterOwner(owner, sources...)
}

type servicesKey struct{}

// Provide makes s the machine services of the manager behind shared. For the
// infra module.
func Provide(shared modules.Shared, s *Services) {
	shared.Services.Provide(servicesKey{}, s)
}

// From returns the machine services of the manager behind shared. It fails
// when the infra module is not set up on it: a module that needs the
// services must declare that it requires infra (modules.Requirer).
func From(shared modules.Shared) (*Services, error) {
	if shared.Services != nil {
		if v, ok := shared.Services.Lookup(servicesKey{}); ok {
			return v.(*Services), nil
		}
	}
	return nil, errors.New("the machine services are not set up: the infra module must be enabled (and set up first)")
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

// BackendKind names the backend b selects ("docker", "inMemory"), "" when not
// exactly one.
func BackendKind(b *v1alpha1.MachineBackend) string { return webhooks.MachineBackendKind(b) }

// ClaimName is the name of the IPAddressClaim a machine makes of its
// index-th address pool.
func ClaimName(machine string, index int) string { return addressclaims.ClaimName(machine, index) }
