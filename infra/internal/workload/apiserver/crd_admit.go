package apiserver

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsinstall "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/install"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/managedfields"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes/scheme"
)

// The Handler decodes, converts and defaults objects with client-go's
// scheme, which knows the built-in kinds; CustomResourceDefinitions are
// added to it (as kubectl's scheme adds them), so that they take the same
// path.
func init() {
	utilruntime.Must(apiextensionsv1.AddToScheme(scheme.Scheme))
}

func apiScheme() *runtime.Scheme { return scheme.Scheme }

// crdInternalScheme converts CRDs to the internal version that
// apiextensions-apiserver's validation and registry strategy take.
var crdInternalScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	apiextensionsinstall.Install(s)
	return s
}()

// crdTypeConverter is server-side apply's view of CRDs: client-go's
// schema knows the built-in kinds only, and apiextensions-apiserver ships
// none for its apply configurations, so the structure is deduced from the
// objects (maps merged by key, lists atomic).
var crdTypeConverter = managedfields.NewDeducedTypeConverter()

// typeConverterFor is the server-side apply schema of a built-in resource.
func (h *Handler) typeConverterFor(res *resource) managedfields.TypeConverter {
	if isCRDResource(res) || isAPIServiceResource(res) {
		// (kube-aggregator ships no apply configurations either.)
		return crdTypeConverter
	}
	return h.typeConverter
}

// admit is what kube-apiserver's registry does to a write after decoding
// and field management: for CRDs, their strategy (defaults, status kept
// apart, validation); for custom objects, their schema (pruning,
// defaulting, validation) and the storage version. live is nil on create.
func (h *Handler) admit(req *request, live, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	switch {
	case req.res.custom != nil:
		return admitCustom(req, live, obj)
	case isCRDResource(req.res):
		return admitCRD(req, live, obj)
	case isAPIServiceResource(req.res):
		return admitAPIService(req, live, obj)
	}
	return obj, nil
}

// admitCRD defaults and validates a CRD as kube-apiserver's CRD registry
// does, with apiextensions-apiserver's validation; invalid ones are 422
// Invalid with its field errors. Its status is the registry's to set
// (a status write changes only the status). A new CRD gets the cleanup
// finalizer, which holds it, once deleted, until its objects are gone
// (kube-apiserver adds it when the deletion starts).
func admitCRD(req *request, live, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	obj = obj.DeepCopy()
	keepSystemFields(obj, live)
	next, err := internalCRD(obj)
	if err != nil {
		return nil, err
	}
	ctx := context.Background()
	var errs field.ErrorList
	if live == nil {
		next.Status = apiextensions.CustomResourceDefinitionStatus{}
		addStoredVersion(next)
		errs = validation.ValidateCustomResourceDefinition(ctx, next)
		if !slices.Contains(next.Finalizers, crdCleanupFinalizer) {
			next.Finalizers = append(next.Finalizers, crdCleanupFinalizer)
		}
	} else {
		old, err := internalCRD(live)
		if err != nil {
			return nil, err
		}
		if req.subresource == "status" {
			status := next.Status
			next = old.DeepCopy()
			next.Status = status
			next.ManagedFields = obj.GetManagedFields()
			errs = validation.ValidateUpdateCustomResourceDefinitionStatus(next, old)
		} else {
			next.Status = old.Status
			addStoredVersion(next)
			errs = validation.ValidateCustomResourceDefinitionUpdate(ctx, next, old)
		}
	}
	if len(errs) > 0 {
		return nil, apierrors.NewInvalid(crdResource.gvk().GroupKind(), next.Name, errs)
	}
	out := &apiextensionsv1.CustomResourceDefinition{}
	if err := crdInternalScheme.Convert(next, out, nil); err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("failed to convert the CustomResourceDefinition %s: %w", next.Name, err))
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(out)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("failed to encode the CustomResourceDefinition %s: %w", next.Name, err))
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(crdResource.gvk())
	return u, nil
}

// addStoredVersion adds the storage version to status.storedVersions, as
// kube-apiserver's CRD registry does on every write.
func addStoredVersion(crd *apiextensions.CustomResourceDefinition) {
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			if !slices.Contains(crd.Status.StoredVersions, v.Name) {
				crd.Status.StoredVersions = append(crd.Status.StoredVersions, v.Name)
			}
			return
		}
	}
}

// internalCRD is obj defaulted (as v1) and in the internal version.
func internalCRD(obj *unstructured.Unstructured) (*apiextensions.CustomResourceDefinition, error) {
	v1 := &apiextensionsv1.CustomResourceDefinition{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, v1); err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("failed to decode the CustomResourceDefinition: %v", err))
	}
	crdInternalScheme.Default(v1)
	out := &apiextensions.CustomResourceDefinition{}
	if err := crdInternalScheme.Convert(v1, out, nil); err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("failed to convert the CustomResourceDefinition: %v", err))
	}
	return out, nil
}
