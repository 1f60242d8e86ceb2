package webhooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// What dev installs in a cluster carries these marks, so that what a killed
// dev left can be found and undone later (Repair) from the cluster alone,
// without any file of the dead process.
const (
	// InstalledByLabel marks webhook configurations and the ExtensionConfig
	// dev created; they are deleted when it stops.
	InstalledByLabel = "dev.capi-monolith.io/installed-by"
	// InstalledByValue is InstalledByLabel's value.
	InstalledByValue = "capi-monolith-dev"
	// OwnerAnnotation names the dev process ("<host> <pid> <start time>")
	// that installed a marked object, so that a later start does not undo
	// what a live dev uses.
	OwnerAnnotation = "dev.capi-monolith.io/owner"
	// OriginalConversionAnnotation holds, on a CRD whose conversion dev
	// pointed at its webhook server, the conversion before that (JSON;
	// "null" for none).
	OriginalConversionAnnotation = "dev.capi-monolith.io/original-conversion"
)

// Mark labels both configurations as installed by dev, owned by owner.
func (w *Configurations) Mark(owner string) {
	for _, obj := range w.objects() {
		MarkObject(obj, owner)
	}
}

// MarkObject labels obj as installed by dev, owned by owner.
func MarkObject(obj client.Object, owner string) {
	labels := obj.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[InstalledByLabel] = InstalledByValue
	obj.SetLabels(labels)
	if owner != "" {
		annotations := obj.GetAnnotations()
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[OwnerAnnotation] = owner
		obj.SetAnnotations(annotations)
	}
}

// Leftovers is what Repair found a dev left in a cluster.
type Leftovers struct {
	// Objects are "Kind name" of the deleted marked objects.
	Objects []string
	// Conversions are the CRDs whose conversion was given back.
	Conversions []string
}

// Empty is true when nothing was left.
func (l Leftovers) Empty() bool { return len(l.Objects) == 0 && len(l.Conversions) == 0 }

func (l Leftovers) String() string {
	parts := append([]string{}, l.Objects...)
	for _, crd := range l.Conversions {
		parts = append(parts, "conversion of CRD "+crd)
	}
	return strings.Join(parts, ", ")
}

// LiveOwnerFunc tells whether the dev process named by an OwnerAnnotation
// still runs.
type LiveOwnerFunc func(owner string) bool

// Repair undoes what a dev that did not stop cleanly (kill -9, a crash, a
// lost machine) left in a cluster: it deletes the marked webhook
// configurations and extra (e.g. the ExtensionConfig; their kinds must be in
// c's scheme), and gives every CRD with an OriginalConversionAnnotation its
// conversion back. It fails, changing nothing, when a marked object belongs
// to a dev that still runs (live).
func Repair(ctx context.Context, c client.Client, live LiveOwnerFunc, extra ...client.ObjectList) (Leftovers, error) {
	var out Leftovers
	lists := append([]client.ObjectList{
		&admissionregistrationv1.MutatingWebhookConfigurationList{},
		&admissionregistrationv1.ValidatingWebhookConfigurationList{},
	}, extra...)
	var marked []client.Object
	for _, list := range lists {
		err := c.List(ctx, list, client.MatchingLabels{InstalledByLabel: InstalledByValue})
		if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
			// The kind is not installed (no Cluster API CRDs yet): nothing
			// of it to undo.
			continue
		}
		if err != nil {
			return out, fmt.Errorf("failed to list what capi-monolith dev installed (%T): %w", list, err)
		}
		items, err := objectsOf(list)
		if err != nil {
			return out, err
		}
		for _, obj := range items {
			if owner := obj.GetAnnotations()[OwnerAnnotation]; owner != "" && live != nil && live(owner) {
				return out, fmt.Errorf("the cluster is in use by a running capi-monolith dev (%s owns %T %s): stop it first", owner, obj, obj.GetName())
			}
			marked = append(marked, obj)
		}
	}
	var errs []error
	for _, obj := range marked {
		if err := c.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("failed to delete %T %s: %w", obj, obj.GetName(), err))
			continue
		}
		out.Objects = append(out.Objects, fmt.Sprintf("%s %s", kindOf(obj), obj.GetName()))
	}

	crds := &apiextensionsv1.CustomResourceDefinitionList{}
	if err := c.List(ctx, crds); err != nil {
		return out, errors.Join(append(errs, fmt.Errorf("failed to list CRDs: %w", err))...)
	}
	for i := range crds.Items {
		crd := &crds.Items[i]
		original, ok := crd.Annotations[OriginalConversionAnnotation]
		if !ok {
			continue
		}
		var conv *apiextensionsv1.CustomResourceConversion
		if err := json.Unmarshal([]byte(original), &conv); err != nil {
			errs = append(errs, fmt.Errorf("failed to read the original conversion of CRD %s: %w", crd.Name, err))
			continue
		}
		base := crd.DeepCopy()
		delete(crd.Annotations, OriginalConversionAnnotation)
		// Only a conversion still pointing at loopback is dev's: one changed
		// since (e.g. Cluster API installed for real) is kept.
		if pointsAtLoopback(crd.Spec.Conversion) {
			crd.Spec.Conversion = conv
			out.Conversions = append(out.Conversions, crd.Name)
		}
		if err := c.Patch(ctx, crd, client.MergeFrom(base)); err != nil {
			errs = append(errs, fmt.Errorf("failed to restore the conversion of CRD %s: %w", crd.Name, err))
		}
	}
	return out, errors.Join(errs...)
}

func pointsAtLoopback(conv *apiextensionsv1.CustomResourceConversion) bool {
	if conv == nil || conv.Webhook == nil || conv.Webhook.ClientConfig == nil || conv.Webhook.ClientConfig.URL == nil {
		return false
	}
	url := *conv.Webhook.ClientConfig.URL
	return strings.HasPrefix(url, "https://127.0.0.1:") || strings.HasPrefix(url, "https://[::1]:") || strings.HasPrefix(url, "https://localhost:")
}

func kindOf(obj client.Object) string {
	t := fmt.Sprintf("%T", obj)
	return t[strings.LastIndexByte(t, '.')+1:]
}

// objectsOf returns the items of a typed list as objects.
func objectsOf(list client.ObjectList) ([]client.Object, error) {
	items, err := meta.ExtractList(list)
	if err != nil {
		return nil, fmt.Errorf("failed to read %T: %w", list, err)
	}
	out := make([]client.Object, 0, len(items))
	for _, item := range items {
		obj, ok := item.(client.Object)
		if !ok {
			return nil, fmt.Errorf("failed to read %T: item %T is not an object", list, item)
		}
		out = append(out, obj)
	}
	return out, nil
}
