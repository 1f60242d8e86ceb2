package machine

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/labels"

	"github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
)

// Owner answers what differs between the kinds of Cluster API objects a
// MonolithMachine may be the infrastructure of: a Machine (the built-in
// owner) or, registered by the machinepool module, a MachinePool whose
// instance it is.
type Owner interface {
	// Kind names the owner kind in logs.
	Kind() string
	// Owns reports whether mm belongs to this kind of owner.
	Owns(mm *v1alpha1.MonolithMachine) bool
	// Get reads what the controller needs of mm's owner.
	Get(ctx context.Context, mm *v1alpha1.MonolithMachine) (Facts, error)
	// LegacyFinalizers are finalizers earlier releases put on this owner's
	// MonolithMachines for work this controller now does; it removes them.
	LegacyFinalizers() []string
}

// Facts are what a MonolithMachine's owner says about the node to make.
type Facts struct {
	// Found is false while the owner does not exist (yet); nothing is
	// provisioned then.
	Found bool
	// WaitingReason is the BackendMachineProvisioned reason while the owner
	// is not found; empty sets no condition.
	WaitingReason string
	// BootstrapDataSecret names the Secret of the bootstrap data; nil while
	// the bootstrap provider has not made it.
	BootstrapDataSecret *string
	// Version is the Kubernetes version of the node.
	Version string
	// ControlPlane tells a control plane node.
	ControlPlane bool
	// FailureDomain the node must be placed in: the Machine's
	// spec.failureDomain; "" leaves it to the MonolithMachine's own.
	FailureDomain string
}

// machineOwner is the built-in owner: a Cluster API Machine, the owner
// reference of every MonolithMachine not labelled as a pool instance.
type machineOwner struct {
	client client.Client
}

func (machineOwner) Kind() string                           { return "Machine" }
func (machineOwner) Owns(mm *v1alpha1.MonolithMachine) bool { return !labels.IsMachinePoolOwned(mm) }
func (machineOwner) LegacyFinalizers() []string             { return nil }
func (o machineOwner) Get(ctx context.Context, mm *v1alpha1.MonolithMachine) (Facts, error) {
	machine, err := util.GetOwnerMachine(ctx, o.client, mm.ObjectMeta)
	if err != nil {
		return Facts{}, fmt.Errorf("failed to get the owner Machine: %w", err)
	}
	if machine == nil {
		return Facts{}, nil
	}
	return Facts{
		Found:               true,
		BootstrapDataSecret: machine.Spec.Bootstrap.DataSecretName,
		Version:             machine.Spec.Version,
		ControlPlane:        util.IsControlPlaneMachine(machine),
		FailureDomain:       machine.Spec.FailureDomain,
	}, nil
}

// waitsForOwnerMachine reports a MonolithMachine of a Machine whose owner
// reference Cluster API's Machine controller has not set yet. A pool
// instance's owner is found by its labels and never waits here.
func (r *Reconciler) waitsForOwnerMachine(mm *v1alpha1.MonolithMachine) bool {
	if _, ok := r.owners.of(mm).(machineOwner); !ok {
		return false
	}
	for _, ref := range mm.OwnerReferences {
		if gv, err := schema.ParseGroupVersion(ref.APIVersion); err == nil && ref.Kind == "Machine" && gv.Group == clusterv1.GroupVersion.Group {
			return false
		}
	}
	return true
}

// owners are the owner adapters: those registered by other modules, then
// the built-in Machine owner. The first that owns a machine answers for it.
type owners struct {
	mu      sync.RWMutex
	list    []Owner
	builtin Owner
}

func (o *owners) add(owner Owner) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.list = append(o.list, owner)
}

func (o *owners) setBuiltin(owner Owner) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.builtin = owner
}

func (o *owners) all() []Owner {
	o.mu.RLock()
	defer o.mu.RUnlock()
	out := slices.Clone(o.list)
	if o.builtin != nil {
		out = append(out, o.builtin)
	}
	return out
}

func (o *owners) of(mm *v1alpha1.MonolithMachine) Owner {
	for _, owner := range o.all() {
		if owner.Owns(mm) {
			return owner
		}
	}
	return nil
}

func (o *owners) legacyFinalizers() []string {
	var out []string
	for _, owner := range o.all() {
		out = append(out, owner.LegacyFinalizers()...)
	}
	return out
}
