// Package webhooks validates the machinepool module's kinds,
// MonolithMachinePool and MonolithMachinePoolTemplate, before the
// apiserver stores them.
//
// The Validator rejects, as a 422 naming every problem and its field at
// once: an instance template whose backend is not exactly one of docker or
// inMemory, a negative simulated delay, a malformed or repeated IP pool
// reference, and a strategy whose maxSurge and maxUnavailable are both 0
// (a rollout could then never start). A pool's instance template and
// strategy may change (the instances are then replaced, rolling); its
// providerID may only be set once. A template keeps its spec, except under
// the server-side-apply dry-runs of Cluster API's topology controller,
// which compute diffs and persist nothing (contracts/dryrun).
//
// An update that leaves the spec alone (labels, finalizers, owner
// references) is always allowed, so that an object stored before the
// webhooks ran can still be reconciled, finalized and deleted.
package webhooks

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/capi-monolith/capi-monolith/contracts/dryrun"
	"github.com/capi-monolith/capi-monolith/infra/machines"
	"github.com/capi-monolith/capi-monolith/machinepool/api/v1alpha1"
)

// +kubebuilder:webhook:verbs=create;update,path=/validate-infrastructure-cluster-x-k8s-io-v1alpha1-monolithmachinepool,mutating=false,failurePolicy=fail,matchPolicy=Equivalent,groups=infrastructure.cluster.x-k8s.io,resources=monolithmachinepools,versions=v1alpha1,name=validation.monolithmachinepool.infrastructure.cluster.x-k8s.io,sideEffects=None,admissionReviewVersions=v1
// +kubebuilder:webhook:verbs=create;update,path=/validate-infrastructure-cluster-x-k8s-io-v1alpha1-monolithmachinepooltemplate,mutating=false,failurePolicy=fail,matchPolicy=Equivalent,groups=infrastructure.cluster.x-k8s.io,resources=monolithmachinepooltemplates,versions=v1alpha1,name=validation.monolithmachinepooltemplate.infrastructure.cluster.x-k8s.io,sideEffects=None,admissionReviewVersions=v1

const (
	poolKind     = "MonolithMachinePool"
	templateKind = "MonolithMachinePoolTemplate"
)

var (
	specPath         = field.NewPath("spec")
	templateSpecPath = field.NewPath("spec", "template", "spec")
)

var (
	_ admission.Validator[*v1alpha1.MonolithMachinePool]         = poolValidator{}
	_ admission.Validator[*v1alpha1.MonolithMachinePoolTemplate] = templateValidator{}
)

// SetupWithManager registers the validating webhooks of both kinds on the
// manager's webhook server.
func SetupWithManager(mgr ctrl.Manager) error {
	if mgr == nil {
		return errors.New("failed to set up the machinepool webhooks: no manager")
	}
	if err := ctrl.NewWebhookManagedBy(mgr, &v1alpha1.MonolithMachinePool{}).WithValidator(poolValidator{}).Complete(); err != nil {
		return fmt.Errorf("failed to set up the %s webhook: %w", poolKind, err)
	}
	if err := ctrl.NewWebhookManagedBy(mgr, &v1alpha1.MonolithMachinePoolTemplate{}).WithValidator(templateValidator{}).Complete(); err != nil {
		return fmt.Errorf("failed to set up the %s webhook: %w", templateKind, err)
	}
	return nil
}

type poolValidator struct{}

func (poolValidator) ValidateCreate(_ context.Context, p *v1alpha1.MonolithMachinePool) (admission.Warnings, error) {
	if p == nil {
		return nil, apierrors.NewBadRequest("expected a " + poolKind + ", got nothing")
	}
	return nil, invalid(poolKind, p.Name, validateSpec(&p.Spec, specPath))
}

func (poolValidator) ValidateUpdate(_ context.Context, old, p *v1alpha1.MonolithMachinePool) (admission.Warnings, error) {
	if old == nil || p == nil {
		return nil, apierrors.NewBadRequest("expected a " + poolKind + ", got nothing")
	}
	if equality.Semantic.DeepEqual(old.Spec, p.Spec) {
		return nil, nil
	}
	errs := validateSpec(&p.Spec, specPath)
	if old.Spec.ProviderID != "" && p.Spec.ProviderID != old.Spec.ProviderID {
		errs = append(errs, field.Forbidden(specPath.Child("providerID"), fmt.Sprintf("cannot change once set; it is %q", old.Spec.ProviderID)))
	}
	return nil, invalid(poolKind, p.Name, errs)
}

func (poolValidator) ValidateDelete(context.Context, *v1alpha1.MonolithMachinePool) (admission.Warnings, error) {
	return nil, nil
}

type templateValidator struct{}

func (templateValidator) ValidateCreate(_ context.Context, t *v1alpha1.MonolithMachinePoolTemplate) (admission.Warnings, error) {
	if t == nil {
		return nil, apierrors.NewBadRequest("expected a " + templateKind + ", got nothing")
	}
	return nil, invalid(templateKind, t.Name, validateSpec(&t.Spec.Template.Spec, templateSpecPath))
}

// ValidateUpdate keeps the template's spec, except in the topology
// controller's dry-runs, where the spec is still checked like a new one.
func (templateValidator) ValidateUpdate(ctx context.Context, old, t *v1alpha1.MonolithMachinePoolTemplate) (admission.Warnings, error) {
	if old == nil || t == nil {
		return nil, apierrors.NewBadRequest("expected a " + templateKind + ", got nothing")
	}
	if equality.Semantic.DeepEqual(old.Spec, t.Spec) {
		return nil, nil
	}
	errs := validateSpec(&t.Spec.Template.Spec, templateSpecPath)
	if !dryrun.IsTopologyDryRun(ctx, t) {
		errs = append(errs, field.Forbidden(specPath, fmt.Sprintf(
			"a %s's spec is immutable; create a new template and point the cluster (or its ClusterClass) at it", templateKind)))
	}
	return nil, invalid(templateKind, t.Name, errs)
}

func (templateValidator) ValidateDelete(context.Context, *v1alpha1.MonolithMachinePoolTemplate) (admission.Warnings, error) {
	return nil, nil
}

// validateSpec reports every problem of a pool spec found at path (spec,
// or spec.template.spec).
func validateSpec(spec *v1alpha1.MonolithMachinePoolSpec, path *field.Path) field.ErrorList {
	// The instance template is a machine's backend and address pools:
	// infra's machine validation, the one the MonolithMachine webhook runs.
	errs := machines.ValidateMachine(&spec.Template.Backend, spec.Template.AddressesFromPools, path.Child("template"))
	s := spec.Strategy
	if ptr.Deref(s.MaxSurge, v1alpha1.DefaultMaxSurge) == 0 && ptr.Deref(s.MaxUnavailable, v1alpha1.DefaultMaxUnavailable) == 0 {
		errs = append(errs, field.Invalid(path.Child("strategy"), "maxSurge=0, maxUnavailable=0",
			"maxSurge and maxUnavailable must not both be 0: no instance could ever be replaced"))
	}
	return errs
}

func invalid(kind, name string, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(v1alpha1.GroupVersion.WithKind(kind).GroupKind(), name, errs)
}
