package webhooks

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
)

// Kind names, as the messages and the typed adapters use them.
const (
	clusterKind         = "MonolithCluster"
	clusterTemplateKind = "MonolithClusterTemplate"
	machineKind         = "MonolithMachine"
	machineTemplateKind = "MonolithMachineTemplate"
)

// +kubebuilder:webhook:verbs=create;update,path=/mutate-infrastructure-cluster-x-k8s-io-v1alpha1-monolithcluster,mutating=true,failurePolicy=fail,matchPolicy=Equivalent,groups=infrastructure.cluster.x-k8s.io,resources=monolithclusters,versions=v1alpha1,name=default.monolithcluster.infrastructure.cluster.x-k8s.io,sideEffects=None,admissionReviewVersions=v1
// +kubebuilder:webhook:verbs=create;update,path=/mutate-infrastructure-cluster-x-k8s-io-v1alpha1-monolithclustertemplate,mutating=true,failurePolicy=fail,matchPolicy=Equivalent,groups=infrastructure.cluster.x-k8s.io,resources=monolithclustertemplates,versions=v1alpha1,name=default.monolithclustertemplate.infrastructure.cluster.x-k8s.io,sideEffects=None,admissionReviewVersions=v1
// +kubebuilder:webhook:verbs=create;update,path=/validate-infrastructure-cluster-x-k8s-io-v1alpha1-monolithcluster,mutating=false,failurePolicy=fail,matchPolicy=Equivalent,groups=infrastructure.cluster.x-k8s.io,resources=monolithclusters,versions=v1alpha1,name=validation.monolithcluster.infrastructure.cluster.x-k8s.io,sideEffects=None,admissionReviewVersions=v1
// +kubebuilder:webhook:verbs=create;update,path=/validate-infrastructure-cluster-x-k8s-io-v1alpha1-monolithclustertemplate,mutating=false,failurePolicy=fail,matchPolicy=Equivalent,groups=infrastructure.cluster.x-k8s.io,resources=monolithclustertemplates,versions=v1alpha1,name=validation.monolithclustertemplate.infrastructure.cluster.x-k8s.io,sideEffects=None,admissionReviewVersions=v1
// +kubebuilder:webhook:verbs=create;update,path=/validate-infrastructure-cluster-x-k8s-io-v1alpha1-monolithmachine,mutating=false,failurePolicy=fail,matchPolicy=Equivalent,groups=infrastructure.cluster.x-k8s.io,resources=monolithmachines,versions=v1alpha1,name=validation.monolithmachine.infrastructure.cluster.x-k8s.io,sideEffects=None,admissionReviewVersions=v1
// +kubebuilder:webhook:verbs=create;update,path=/validate-infrastructure-cluster-x-k8s-io-v1alpha1-monolithmachinetemplate,mutating=false,failurePolicy=fail,matchPolicy=Equivalent,groups=infrastructure.cluster.x-k8s.io,resources=monolithmachinetemplates,versions=v1alpha1,name=validation.monolithmachinetemplate.infrastructure.cluster.x-k8s.io,sideEffects=None,admissionReviewVersions=v1

// The machine check reads the machine's Cluster and its MonolithCluster.
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=monolithclusters,verbs=get;list;watch

// Defaulter defaults MonolithClusters and MonolithClusterTemplates. It
// implements admission.Defaulter[runtime.Object]: objects of any other
// type, and nil objects, are rejected with a 400, never a panic.
type Defaulter struct{}

var _ admission.Defaulter[runtime.Object] = Defaulter{}

// Validator validates the four infra kinds. It implements
// admission.Validator[runtime.Object]: objects of any other type, and nil
// objects, are rejected with a 400, never a panic.
type Validator struct {
	// Client reads the Cluster and the MonolithCluster of a MonolithMachine
	// being created; the manager's cached client is meant. Only that check
	// needs it: without a Client, creating a MonolithMachine that carries
	// the cluster-name label is a 500.
	Client client.Reader
}

var _ admission.Validator[runtime.Object] = &Validator{}

// SetupWithManager registers the defaulting and validating webhooks of the
// four infra kinds on the manager's webhook server, reading through the
// manager's client.
func SetupWithManager(mgr ctrl.Manager) error {
	if mgr == nil {
		return errors.New("failed to set up the infra webhooks: no manager")
	}
	return (&Validator{Client: mgr.GetClient()}).SetupWithManager(mgr)
}

// SetupWithManager registers v as the validating webhook of the four infra
// kinds, and a Defaulter as the defaulting webhook of the cluster kinds.
// MonolithMachines and their templates have nothing to default: no
// mutating webhook slows their requests down.
func (v *Validator) SetupWithManager(mgr ctrl.Manager) error {
	if mgr == nil {
		return errors.New("failed to set up the infra webhooks: no manager")
	}
	if v.Client == nil {
		return errors.New("failed to set up the infra webhooks: Client is nil")
	}
	// The machine check reads Clusters: fail now rather than on every
	// MonolithMachine when the scheme lacks them.
	if gvk := clusterv1.GroupVersion.WithKind("Cluster"); !mgr.GetScheme().Recognizes(gvk) {
		return fmt.Errorf("failed to set up the infra webhooks: the manager's scheme has no %s", gvk)
	}
	var d Defaulter
	steps := []struct {
		kind string
		done func() error
	}{
		{clusterKind, func() error {
			return ctrl.NewWebhookManagedBy(mgr, &v1alpha1.MonolithCluster{}).
				WithDefaulter(kindDefaulter[*v1alpha1.MonolithCluster]{d: d}).
				WithValidator(kindValidator[*v1alpha1.MonolithCluster]{v: v}).
				Complete()
		}},
		{clusterTemplateKind, func() error {
			return ctrl.NewWebhookManagedBy(mgr, &v1alpha1.MonolithClusterTemplate{}).
				WithDefaulter(kindDefaulter[*v1alpha1.MonolithClusterTemplate]{d: d}).
				WithValidator(kindValidator[*v1alpha1.MonolithClusterTemplate]{v: v}).
				Complete()
		}},
		{machineKind, func() error {
			return ctrl.NewWebhookManagedBy(mgr, &v1alpha1.MonolithMachine{}).
				WithValidator(kindValidator[*v1alpha1.MonolithMachine]{v: v}).
				Complete()
		}},
		{machineTemplateKind, func() error {
			return ctrl.NewWebhookManagedBy(mgr, &v1alpha1.MonolithMachineTemplate{}).
				WithValidator(kindValidator[*v1alpha1.MonolithMachineTemplate]{v: v}).
				Complete()
		}},
	}
	for _, s := range steps {
		if err := s.done(); err != nil {
			return fmt.Errorf("failed to set up the %s webhooks: %w", s.kind, err)
		}
	}
	return nil
}

// kindDefaulter and kindValidator adapt Defaulter and Validator to the
// typed interfaces controller-runtime's webhook builder wants for one kind.
type kindDefaulter[T runtime.Object] struct{ d Defaulter }

func (k kindDefaulter[T]) Default(ctx context.Context, obj T) error {
	return k.d.Default(ctx, obj)
}

type kindValidator[T runtime.Object] struct{ v *Validator }

func (k kindValidator[T]) ValidateCreate(ctx context.Context, obj T) (admission.Warnings, error) {
	return k.v.ValidateCreate(ctx, obj)
}

func (k kindValidator[T]) ValidateUpdate(ctx context.Context, oldObj, newObj T) (admission.Warnings, error) {
	return k.v.ValidateUpdate(ctx, oldObj, newObj)
}

func (k kindValidator[T]) ValidateDelete(ctx context.Context, obj T) (admission.Warnings, error) {
	return k.v.ValidateDelete(ctx, obj)
}

// Default fills in the backend settings left empty. Only the backends that
// are set get defaults: the validator decides whether the pair is valid.
func (Defaulter) Default(_ context.Context, obj runtime.Object) error {
	o, err := objectOf(obj)
	if err != nil {
		return err
	}
	switch o := o.(type) {
	case *v1alpha1.MonolithCluster:
		defaultClusterSpec(&o.Spec)
	case *v1alpha1.MonolithClusterTemplate:
		defaultClusterSpec(&o.Spec.Template.Spec)
	default:
		return apierrors.NewBadRequest(fmt.Sprintf("expected a %s or a %s to default, got a %s",
			clusterKind, clusterTemplateKind, kindOf(o)))
	}
	return nil
}

// ValidateCreate checks the spec; for a MonolithMachine, also that its
// backend is its cluster's.
func (v *Validator) ValidateCreate(ctx context.Context, obj runtime.Object) (admission.Warnings, error) {
	o, err := objectOf(obj)
	if err != nil {
		return nil, err
	}
	var errs field.ErrorList
	var warnings admission.Warnings
	switch o := o.(type) {
	case *v1alpha1.MonolithCluster:
		errs = validateClusterSpec(&o.Spec, specPath)
		taken, err := v.checkEndpointFree(ctx, o)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		errs = append(errs, taken...)
	case *v1alpha1.MonolithClusterTemplate:
		errs = validateClusterSpec(&o.Spec.Template.Spec, templateSpecPath)
	case *v1alpha1.MonolithMachine:
		errs = validateMachineSpec(&o.Spec, specPath)
		var clusterErrs field.ErrorList
		warnings, clusterErrs, err = v.checkClusterBackend(ctx, o)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		errs = append(errs, clusterErrs...)
	case *v1alpha1.MonolithMachineTemplate:
		errs = validateMachineSpec(&o.Spec.Template.Spec, templateSpecPath)
	}
	if len(errs) > 0 {
		return warnings, invalid(o, errs)
	}
	return warnings, nil
}

// ValidateUpdate applies the immutability rules of each kind, and checks a
// changed spec like a new one.
func (v *Validator) ValidateUpdate(ctx context.Context, oldObj, newObj runtime.Object) (admission.Warnings, error) {
	oldO, err := objectOf(oldObj)
	if err != nil {
		return nil, err
	}
	o, err := objectOf(newObj)
	if err != nil {
		return nil, err
	}
	if kindOf(oldO) != kindOf(o) {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("cannot update a %s into a %s", kindOf(oldO), kindOf(o)))
	}
	var errs field.ErrorList
	switch o := o.(type) {
	case *v1alpha1.MonolithCluster:
		oldSpec := &oldO.(*v1alpha1.MonolithCluster).Spec
		errs = validateClusterUpdate(oldSpec, &o.Spec)
		if !oldSpec.ControlPlaneEndpoint.IsValid() {
			// Set now (by the user, or by the controller once it chose a
			// free port): it must be no other cluster's.
			taken, err := v.checkEndpointFree(ctx, o)
			if err != nil {
				return nil, apierrors.NewInternalError(err)
			}
			errs = append(errs, taken...)
		}
	case *v1alpha1.MonolithClusterTemplate:
		errs = validateClusterTemplateUpdate(ctx, oldO.(*v1alpha1.MonolithClusterTemplate), o)
	case *v1alpha1.MonolithMachine:
		errs = validateMachineUpdate(&oldO.(*v1alpha1.MonolithMachine).Spec, &o.Spec)
		errs = append(errs, validateClusterNameLabelUpdate(oldO, o)...)
	case *v1alpha1.MonolithMachineTemplate:
		errs = validateMachineTemplateUpdate(ctx, oldO.(*v1alpha1.MonolithMachineTemplate), o)
	}
	if len(errs) > 0 {
		return nil, invalid(o, errs)
	}
	return nil, nil
}

// ValidateDelete allows every deletion: the finalizers of the reconcilers
// release what the objects hold.
func (v *Validator) ValidateDelete(_ context.Context, obj runtime.Object) (admission.Warnings, error) {
	_, err := objectOf(obj)
	return nil, err
}

// objectOf returns obj as one of the four infra kinds, or a 400 for nil
// and foreign objects.
func objectOf(obj runtime.Object) (client.Object, error) {
	switch o := obj.(type) {
	case *v1alpha1.MonolithCluster:
		if o != nil {
			return o, nil
		}
	case *v1alpha1.MonolithClusterTemplate:
		if o != nil {
			return o, nil
		}
	case *v1alpha1.MonolithMachine:
		if o != nil {
			return o, nil
		}
	case *v1alpha1.MonolithMachineTemplate:
		if o != nil {
			return o, nil
		}
	case nil:
	default:
		return nil, apierrors.NewBadRequest(fmt.Sprintf("expected a %s, %s, %s or %s, got %T",
			clusterKind, clusterTemplateKind, machineKind, machineTemplateKind, obj))
	}
	return nil, apierrors.NewBadRequest("expected an infra object, got nothing")
}

// kindOf names the kind of one of the four infra kinds; the type says it,
// TypeMeta is often empty on decoded objects.
func kindOf(o client.Object) string {
	switch o.(type) {
	case *v1alpha1.MonolithCluster:
		return clusterKind
	case *v1alpha1.MonolithClusterTemplate:
		return clusterTemplateKind
	case *v1alpha1.MonolithMachine:
		return machineKind
	case *v1alpha1.MonolithMachineTemplate:
		return machineTemplateKind
	}
	return fmt.Sprintf("%T", o)
}

func invalid(o client.Object, errs field.ErrorList) error {
	return apierrors.NewInvalid(v1alpha1.GroupVersion.WithKind(kindOf(o)).GroupKind(), o.GetName(), errs)
}
