package webhooks

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/infra/internal/clusters"
)

var errNoClient = errors.New("the infra validator has no Client")

// ipamGroup is Cluster API's IPAM group, where the pool kinds of IPAM
// providers (ours included) live; named in a hint.
const ipamGroup = "ipam.cluster.x-k8s.io"

// MachineBackendKind names the backend b selects, "" when not exactly one.
func MachineBackendKind(b *v1alpha1.MachineBackend) string {
	return backendKind(b.Docker != nil, b.InMemory != nil)
}

// validateMachineSpec reports every problem of a machine spec found at path
// (spec, or spec.template.spec).
func validateMachineSpec(spec *v1alpha1.MonolithMachineSpec, path *field.Path) field.ErrorList {
	return ValidateMachine(&spec.Backend, spec.AddressesFromPools, path)
}

// ValidateMachine reports every problem of a machine's backend and address
// pools found under path (path.backend, path.addressesFromPools). The
// machinepool module validates its instance template with it, through
// infra/machines.
func ValidateMachine(b *v1alpha1.MachineBackend, pools []corev1.TypedLocalObjectReference, path *field.Path) field.ErrorList {
	backendPath := path.Child("backend")
	errs := validateBackendChoice(b.Docker != nil, b.InMemory != nil, backendPath)
	if m := b.InMemory; m != nil {
		p := backendPath.Child("inMemory")
		errs = append(errs, validateDelay(m.ProvisioningDelay, p.Child("provisioningDelay"))...)
		errs = append(errs, validateDelay(m.BootstrapDelay, p.Child("bootstrapDelay"))...)
	}
	errs = append(errs, validatePoolRefs(pools, path.Child("addressesFromPools"))...)
	return errs
}

func validateDelay(d *metav1.Duration, path *field.Path) field.ErrorList {
	switch {
	case d == nil || (d.Duration >= 0 && d.Duration <= v1alpha1.MaxSimulatedDelay):
		return nil
	case d.Duration < 0:
		return field.ErrorList{field.Invalid(path, d.Duration.String(), "must not be negative")}
	}
	return field.ErrorList{field.Invalid(path, d.Duration.String(), "must be at most "+v1alpha1.MaxSimulatedDelay.String())}
}

// validateClusterNameLabelUpdate keeps the cluster-name label of a machine
// once set: the node's container and the cluster's leftover cleanup find a
// machine by it, so a changed label would orphan its node.
func validateClusterNameLabelUpdate(oldObj, obj client.Object) field.ErrorList {
	old := oldObj.GetLabels()[clusterv1.ClusterNameLabel]
	if cur, ok := obj.GetLabels()[clusterv1.ClusterNameLabel]; old != "" && (!ok || cur != old) {
		return field.ErrorList{field.Forbidden(field.NewPath("metadata", "labels").Key(clusterv1.ClusterNameLabel),
			fmt.Sprintf("cannot change or be removed once set; it is %q", old))}
	}
	return nil
}

// poolKey identifies a pool reference; two references with one key would
// claim two addresses from one pool under two claim names.
type poolKey struct{ apiGroup, kind, name string }

// validatePoolRefs requires a group, a kind and a name in every reference,
// and no reference twice.
func validatePoolRefs(refs []corev1.TypedLocalObjectReference, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := make(map[poolKey]bool, len(refs))
	for i, ref := range refs {
		p := path.Index(i)
		var group string
		if ref.APIGroup != nil {
			group = *ref.APIGroup
		}
		if group == "" {
			errs = append(errs, field.Required(p.Child("apiGroup"), "the API group of the pool is required, e.g. "+ipamGroup))
		}
		if ref.Kind == "" {
			errs = append(errs, field.Required(p.Child("kind"), "the kind of the pool is required"))
		}
		if ref.Name == "" {
			errs = append(errs, field.Required(p.Child("name"), "the name of the pool is required"))
		}
		key := poolKey{apiGroup: group, kind: ref.Kind, name: ref.Name}
		if seen[key] {
			errs = append(errs, field.Duplicate(p, fmt.Sprintf("%s.%s %s", ref.Kind, group, ref.Name)))
		}
		seen[key] = true
	}
	return errs
}

// checkClusterBackend compares a new machine's backend with its cluster's:
// the machine's Cluster (label cluster.x-k8s.io/cluster-name), then the
// MonolithCluster the Cluster's spec.infrastructureRef names. It has
// nothing to say while either is missing (Cluster API may create the
// machine first) or when the cluster's infrastructure is not ours (a
// warning). When the Client cannot read them (e.g. a namespace the cache
// does not cover) it warns too: refusing would block machines this
// provider does not reconcile.
func (v *Validator) checkClusterBackend(ctx context.Context, m *v1alpha1.MonolithMachine) (admission.Warnings, field.ErrorList, error) {
	kind := MachineBackendKind(&m.Spec.Backend)
	clusterName := m.GetLabels()[clusterv1.ClusterNameLabel]
	if kind == "" || clusterName == "" {
		return nil, nil, nil
	}
	if v.Client == nil {
		return nil, nil, errNoClient
	}
	log := ctrl.LoggerFrom(ctx).WithValues("Cluster", klog.KRef(m.Namespace, clusterName))
	cannotCheck := func(err error) admission.Warnings {
		log.Error(err, "Cannot compare the machine's backend with its cluster's")
		return admission.Warnings{fmt.Sprintf("the backend could not be compared with the cluster's: %v", err)}
	}

	cluster := &clusterv1.Cluster{}
	if err := v.Client.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: clusterName}, cluster); err != nil {
		if apierrors.IsNotFound(err) {
			log.V(4).Info("Cluster not found, the backend is not compared")
			return nil, nil, nil
		}
		return cannotCheck(fmt.Errorf("failed to get Cluster %s: %w", clusterName, err)), nil, nil
	}
	if !cluster.Spec.InfrastructureRef.IsDefined() {
		return nil, nil, nil
	}
	mc, err := clusters.MonolithClusterOf(ctx, v.Client, cluster)
	switch {
	case errors.Is(err, clusters.ErrNotMonolithCluster):
		ref := cluster.Spec.InfrastructureRef
		return admission.Warnings{fmt.Sprintf("Cluster %s has a %s.%s as its infrastructure, not a %s: this machine will not be provisioned",
			clusterName, ref.Kind, ref.APIGroup, clusterKind)}, nil, nil
	case err != nil:
		return cannotCheck(err), nil, nil
	case mc == nil:
		log.V(4).Info("MonolithCluster not found, the backend is not compared", "MonolithCluster", klog.KRef(m.Namespace, cluster.Spec.InfrastructureRef.Name))
		return nil, nil, nil
	}
	clusterKindName := clusterBackendKind(&mc.Spec.Backend)
	if clusterKindName == "" || clusterKindName == kind {
		return nil, nil, nil
	}
	return nil, field.ErrorList{field.Invalid(specPath.Child("backend"), kind, fmt.Sprintf(
		"must be the backend of the machine's cluster: %s %s of Cluster %s uses %s",
		clusterKind, mc.Name, clusterName, clusterKindName))}, nil
}

// validateMachineUpdate keeps a machine's spec, as Cluster API expects of
// infrastructure machines (a change is a new Machine), except for the two
// fields filled in after creation, providerID and failureDomain, each set
// once from empty, and for the fields that change in place
// (v1alpha1.InPlaceMachineSpecFields, what the runtime extension's
// CanUpdateMachine promises Cluster API), validated like a new spec's.
func validateMachineUpdate(oldSpec, spec *v1alpha1.MonolithMachineSpec) field.ErrorList {
	var errs field.ErrorList
	setOnce := func(name, old, cur string) {
		if old != "" && cur != old {
			errs = append(errs, field.Forbidden(specPath.Child(name), fmt.Sprintf("cannot change once set; it is %q", old)))
		}
	}
	setOnce("providerID", oldSpec.ProviderID, spec.ProviderID)
	setOnce("failureDomain", oldSpec.FailureDomain, spec.FailureDomain)

	if !equality.Semantic.DeepEqual(oldSpec.Backend, spec.Backend) {
		if keepsBackendOutsideInPlaceFields(oldSpec, spec) {
			errs = append(errs, validateMachineSpec(spec, specPath)...)
		} else {
			errs = append(errs, field.Forbidden(specPath.Child("backend"), machineImmutable))
		}
	}
	if !equality.Semantic.DeepEqual(oldSpec.AddressesFromPools, spec.AddressesFromPools) {
		errs = append(errs, field.Forbidden(specPath.Child("addressesFromPools"), machineImmutable))
	}
	// Whatever field the spec gains later is immutable too, until a rule
	// here says otherwise.
	rest, oldRest := spec.DeepCopy(), oldSpec.DeepCopy()
	for _, s := range []*v1alpha1.MonolithMachineSpec{rest, oldRest} {
		s.ProviderID, s.FailureDomain, s.Backend, s.AddressesFromPools = "", "", v1alpha1.MachineBackend{}, nil
	}
	if !equality.Semantic.DeepEqual(oldRest, rest) {
		errs = append(errs, field.Forbidden(specPath, machineImmutable))
	}
	return errs
}

// keepsBackendOutsideInPlaceFields reports whether the two specs' backends
// differ only in fields that change in place. A spec that does not convert
// (it always does) keeps nothing: the change is refused.
func keepsBackendOutsideInPlaceFields(oldSpec, spec *v1alpha1.MonolithMachineSpec) bool {
	backendOnly := func(s *v1alpha1.MonolithMachineSpec) (map[string]any, error) {
		return v1alpha1.MachineSpecWithoutInPlaceFields(&v1alpha1.MonolithMachineSpec{Backend: s.Backend})
	}
	o, err := backendOnly(oldSpec)
	if err != nil {
		return false
	}
	n, err := backendOnly(spec)
	if err != nil {
		return false
	}
	return equality.Semantic.DeepEqual(o, n)
}

var machineImmutable = "is immutable: a MonolithMachine keeps its spec (except providerID and failureDomain, set once, " +
	"and " + inPlaceFieldNames() + ", updated in place); change the template and let Cluster API replace the machine"

// inPlaceFieldNames names the fields of v1alpha1.InPlaceMachineSpecFields.
func inPlaceFieldNames() string {
	names := make([]string, 0, len(v1alpha1.InPlaceMachineSpecFields))
	for _, p := range v1alpha1.InPlaceMachineSpecFields {
		names = append(names, specPath.Child(p[0], p[1:]...).String())
	}
	return strings.Join(names, ", ")
}

// validateMachineTemplateUpdate keeps the template's spec, except in the
// topology controller's dry-runs.
func validateMachineTemplateUpdate(ctx context.Context, old, t *v1alpha1.MonolithMachineTemplate) field.ErrorList {
	if equality.Semantic.DeepEqual(old.Spec, t.Spec) {
		return nil
	}
	errs := validateMachineSpec(&t.Spec.Template.Spec, templateSpecPath)
	if !isTopologyDryRun(ctx, t) {
		errs = append(errs, templateImmutable(machineTemplateKind))
	}
	return errs
}
