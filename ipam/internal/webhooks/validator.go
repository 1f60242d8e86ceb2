package webhooks

import (
	"context"
	"errors"
	"fmt"

	"go4.org/netipx"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/capi-monolith/capi-monolith/ipam/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/ipam/internal/index"
)

// +kubebuilder:webhook:verbs=create;update;delete,path=/validate-ipam-cluster-x-k8s-io-v1alpha1-monolithippool,mutating=false,failurePolicy=fail,matchPolicy=Equivalent,groups=ipam.cluster.x-k8s.io,resources=monolithippools,versions=v1alpha1,name=validation.monolithippool.ipam.cluster.x-k8s.io,sideEffects=None,admissionReviewVersions=v1
// +kubebuilder:webhook:verbs=create;update;delete,path=/validate-ipam-cluster-x-k8s-io-v1alpha1-globalmonolithippool,mutating=false,failurePolicy=fail,matchPolicy=Equivalent,groups=ipam.cluster.x-k8s.io,resources=globalmonolithippools,versions=v1alpha1,name=validation.globalmonolithippool.ipam.cluster.x-k8s.io,sideEffects=None,admissionReviewVersions=v1

// +kubebuilder:rbac:groups=ipam.cluster.x-k8s.io,resources=ipaddresses,verbs=get;list;watch
// +kubebuilder:rbac:groups=ipam.cluster.x-k8s.io,resources=monolithipallocations,verbs=get;list;watch
// +kubebuilder:rbac:groups=ipam.cluster.x-k8s.io,resources=monolithippools;globalmonolithippools,verbs=get;list;watch

// PoolValidator validates both pool kinds. It implements
// admission.Validator[runtime.Object]: objects of any other type, and nil
// objects, are rejected with a 400, never a panic.
type PoolValidator struct {
	// Client reads the other pools and the pool's IPAddresses. It must be a
	// cached client whose cache has index.IPAddressPoolField (index.Setup),
	// as the manager's client is: an uncached reader cannot select on it.
	Client client.Reader
}

var _ admission.Validator[runtime.Object] = &PoolValidator{}

// SetupWithManager registers the validating webhooks of both pool kinds on
// the manager's webhook server, reading through the manager's client.
func SetupWithManager(mgr ctrl.Manager) error {
	if mgr == nil {
		return errors.New("failed to set up the pool webhooks: no manager")
	}
	return (&PoolValidator{Client: mgr.GetClient()}).SetupWithManager(mgr)
}

// SetupWithManager registers v as the validating webhook of both pool kinds.
func (v *PoolValidator) SetupWithManager(mgr ctrl.Manager) error {
	if mgr == nil {
		return errors.New("failed to set up the pool webhooks: no manager")
	}
	if v.Client == nil {
		return errors.New("failed to set up the pool webhooks: Client is nil")
	}
	if err := ctrl.NewWebhookManagedBy(mgr, &v1alpha1.MonolithIPPool{}).
		WithValidator(kindValidator[*v1alpha1.MonolithIPPool]{v: v}).
		Complete(); err != nil {
		return fmt.Errorf("failed to set up the %s webhook: %w", v1alpha1.MonolithIPPoolKind, err)
	}
	if err := ctrl.NewWebhookManagedBy(mgr, &v1alpha1.GlobalMonolithIPPool{}).
		WithValidator(kindValidator[*v1alpha1.GlobalMonolithIPPool]{v: v}).
		Complete(); err != nil {
		return fmt.Errorf("failed to set up the %s webhook: %w", v1alpha1.GlobalMonolithIPPoolKind, err)
	}
	return nil
}

// kindValidator adapts PoolValidator to the typed validator that
// controller-runtime's webhook builder wants for one kind.
type kindValidator[T v1alpha1.Pool] struct{ v *PoolValidator }

func (k kindValidator[T]) ValidateCreate(ctx context.Context, obj T) (admission.Warnings, error) {
	return k.v.ValidateCreate(ctx, obj)
}

func (k kindValidator[T]) ValidateUpdate(ctx context.Context, oldObj, newObj T) (admission.Warnings, error) {
	return k.v.ValidateUpdate(ctx, oldObj, newObj)
}

func (k kindValidator[T]) ValidateDelete(ctx context.Context, obj T) (admission.Warnings, error) {
	return k.v.ValidateDelete(ctx, obj)
}

// ValidateCreate checks the spec and that the pool overlaps no other pool.
func (v *PoolValidator) ValidateCreate(ctx context.Context, obj runtime.Object) (admission.Warnings, error) {
	pool, err := poolOf(obj)
	if err != nil {
		return nil, err
	}
	parsed, errs := validateSpec(pool.GetSpec())
	if len(errs) > 0 {
		return nil, invalid(pool, errs)
	}
	warnings, errs, err := v.checkOverlap(ctx, pool, parsed, nil)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	if len(errs) > 0 {
		return warnings, invalid(pool, errs)
	}
	return warnings, nil
}

// ValidateUpdate checks a changed spec like a new one, and also that the
// change keeps the address family and every allocated address. An update
// that leaves the spec alone (finalizers, labels, other annotations) is
// always allowed, so that a pool stored before the webhook ran can still be
// finalized and deleted.
func (v *PoolValidator) ValidateUpdate(ctx context.Context, oldObj, newObj runtime.Object) (admission.Warnings, error) {
	oldPool, err := poolOf(oldObj)
	if err != nil {
		return nil, err
	}
	pool, err := poolOf(newObj)
	if err != nil {
		return nil, err
	}
	if kindOf(oldPool) != kindOf(pool) {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("cannot update a %s into a %s", kindOf(oldPool), kindOf(pool)))
	}
	// The annotation decides how the pool's allocation records are named:
	// changed while records exist, old and new names would both claim one
	// address. The controller refuses to allocate from such a pool too.
	if allowsOverlap(oldPool) != allowsOverlap(pool) {
		n, err := v.liveRecordCount(ctx, pool)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		if n > 0 {
			return nil, invalid(pool, field.ErrorList{field.Forbidden(
				field.NewPath("metadata", "annotations").Key(v1alpha1.AllowOverlapAnnotation),
				fmt.Sprintf("cannot change while %s allocated from the pool; release them (delete their IPAddressClaims) first", countAddresses(n)))})
		}
	}
	// Dropping the allow-overlap annotation makes the pool's overlaps
	// errors again, even with its spec unchanged.
	overlapNoLongerAllowed := allowsOverlap(oldPool) && !allowsOverlap(pool)
	specChanged := !equality.Semantic.DeepEqual(oldPool.GetSpec(), pool.GetSpec())
	if !specChanged && !overlapNoLongerAllowed {
		return nil, nil
	}

	parsed, errs := validateSpec(pool.GetSpec())
	if len(errs) > 0 {
		return nil, invalid(pool, errs)
	}
	// The old spec may not parse when it was stored without the webhook;
	// then nothing of it is kept as a baseline.
	oldParsed, _ := parseSpec(oldPool.GetSpec())
	if oldParsed != nil && oldParsed.Family() != parsed.Family() {
		errs = append(errs, field.Forbidden(specPath.Child("addresses"),
			fmt.Sprintf("the address family cannot change from IPv%d to IPv%d; create a new pool instead", oldParsed.Family(), parsed.Family())))
	}

	// Overlaps the pool already had while it did not allow them were
	// accepted then (another pool allowed them, or no webhook ran): only new
	// ones are errors.
	var baseline *netipx.IPSet
	if oldParsed != nil && !allowsOverlap(oldPool) {
		baseline = oldParsed.IPSet()
	}
	warnings, overlapErrs, err := v.checkOverlap(ctx, pool, parsed, baseline)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	errs = append(errs, overlapErrs...)

	if specChanged {
		strandErrs, err := v.checkStranded(ctx, pool, oldParsed, parsed)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		errs = append(errs, strandErrs...)
	}
	if len(errs) > 0 {
		return warnings, invalid(pool, errs)
	}
	return warnings, nil
}

// ValidateDelete refuses to delete a pool that still has IPAddresses,
// unless the pool carries v1alpha1.SkipDeleteProtectionAnnotation or is
// being deleted by clusterctl move.
func (v *PoolValidator) ValidateDelete(ctx context.Context, obj runtime.Object) (admission.Warnings, error) {
	pool, err := poolOf(obj)
	if err != nil {
		return nil, err
	}
	if v1alpha1.DeleteProtectionSkipped(pool) {
		return nil, nil
	}
	addrs, err := v.addressesOf(ctx, pool)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	if n := len(addrs); n > 0 {
		return nil, apierrors.NewForbidden(groupResourceOf(pool), pool.GetName(), fmt.Errorf(
			"%s still allocated from this %s; delete their IPAddressClaims first, "+
				"or set the annotation %s: \"true\" to delete it anyway (as when moving it with clusterctl move)",
			countAddresses(n), kindOf(pool), v1alpha1.SkipDeleteProtectionAnnotation))
	}
	return nil, nil
}

// poolOf returns obj as a pool, or a 400 for nil and foreign objects.
func poolOf(obj runtime.Object) (v1alpha1.Pool, error) {
	switch p := obj.(type) {
	case *v1alpha1.MonolithIPPool:
		if p != nil {
			return p, nil
		}
	case *v1alpha1.GlobalMonolithIPPool:
		if p != nil {
			return p, nil
		}
	case nil:
	default:
		return nil, apierrors.NewBadRequest(fmt.Sprintf("expected a %s or a %s, got %T",
			v1alpha1.MonolithIPPoolKind, v1alpha1.GlobalMonolithIPPoolKind, obj))
	}
	return nil, apierrors.NewBadRequest("expected a pool, got nothing")
}

func kindOf(p v1alpha1.Pool) string { return index.KeyOf(p).Kind }

// describeFor names other in a message answering a request about pool:
// by name only when it lives in the request's namespace (a global pool
// beside a global pool), otherwise by kind alone, so that a message never
// tells a namespace's users what other namespaces hold.
func describeFor(pool, other v1alpha1.Pool) string {
	switch {
	case other.GetNamespace() == pool.GetNamespace():
		return describe(other)
	case other.GetNamespace() == "":
		return "a " + kindOf(other)
	default:
		return "a " + kindOf(other) + " of another namespace"
	}
}

// describe names a pool in messages: "MonolithIPPool ns/name" or
// "GlobalMonolithIPPool name".
func describe(p v1alpha1.Pool) string {
	if p.GetNamespace() == "" {
		return kindOf(p) + " " + p.GetName()
	}
	return kindOf(p) + " " + p.GetNamespace() + "/" + p.GetName()
}

func groupResourceOf(p v1alpha1.Pool) schema.GroupResource {
	if kindOf(p) == v1alpha1.GlobalMonolithIPPoolKind {
		return v1alpha1.GroupVersion.WithResource("globalmonolithippools").GroupResource()
	}
	return v1alpha1.GroupVersion.WithResource("monolithippools").GroupResource()
}

func invalid(p v1alpha1.Pool, errs field.ErrorList) error {
	return apierrors.NewInvalid(v1alpha1.GroupVersion.WithKind(kindOf(p)).GroupKind(), p.GetName(), errs)
}

func allowsOverlap(p v1alpha1.Pool) bool {
	return p.GetAnnotations()[v1alpha1.AllowOverlapAnnotation] == "true"
}

// countAddresses says "1 IPAddress is" or "3 IPAddresses are".
func countAddresses(n int) string {
	if n == 1 {
		return "1 IPAddress is"
	}
	return fmt.Sprintf("%d IPAddresses are", n)
}
