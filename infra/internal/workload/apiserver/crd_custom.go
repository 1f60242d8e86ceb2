package apiserver

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync"

	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	structurallisttype "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apiextensions-apiserver/pkg/registry/customresource/tableconvertor"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metavalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// crdServing is what one generation of a CRD needs to be served: per
// served version, its schema and validation, built once per generation
// (status changes do not rebuild it).
type crdServing struct {
	generation int64
	versions   []*crdVersion
}

// crdVersion is one served version of a CRD.
type crdVersion struct {
	gv         schema.GroupVersion
	storage    schema.GroupVersion
	namespaced bool
	// structural is nil for a version without a schema (which v1 CRDs
	// cannot have, but a stored one might).
	structural *structuralschema.Structural
	// validator and statusValidator check the OpenAPI schema (of the
	// object, and of its status); cel the x-kubernetes-validations, nil
	// without any.
	validator       apiservervalidation.SchemaValidator
	statusValidator apiservervalidation.SchemaValidator
	cel             *cel.Validator
	status          bool
	scale           *apiextensionsv1.CustomResourceSubresourceScale
	table           tableConvertor

	fieldManagersMu sync.Mutex
	fieldManagers   map[string]*managedfields.FieldManager
}

type tableConvertor interface {
	ConvertToTable(ctx context.Context, obj runtime.Object, tableOptions runtime.Object) (*metav1.Table, error)
}

// customResource is a served version of a CRD as one cluster's set has
// it: the version's serving, and what the CRD's current status says.
type customResource struct {
	*crdVersion
	crdName  string
	listKind string
	// terminating refuses creates: the CRD is being deleted.
	terminating bool
}

func newCRDServing(crd *apiextensionsv1.CustomResourceDefinition) (*crdServing, error) {
	storage, err := apihelpers.GetCRDStorageVersion(crd)
	if err != nil {
		return nil, err
	}
	s := &crdServing{generation: crd.Generation}
	for _, v := range crd.Spec.Versions {
		if !v.Served {
			continue
		}
		cv := &crdVersion{
			gv:            schema.GroupVersion{Group: crd.Spec.Group, Version: v.Name},
			storage:       schema.GroupVersion{Group: crd.Spec.Group, Version: storage},
			namespaced:    crd.Spec.Scope == apiextensionsv1.NamespaceScoped,
			fieldManagers: map[string]*managedfields.FieldManager{},
		}
		var internalSchema *apiextensions.JSONSchemaProps
		if v.Schema != nil && v.Schema.OpenAPIV3Schema != nil {
			internal := &apiextensions.CustomResourceValidation{}
			if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(v.Schema, internal, nil); err != nil {
				return nil, fmt.Errorf("failed to convert the schema of %s %s: %w", crd.Name, v.Name, err)
			}
			internalSchema = internal.OpenAPIV3Schema
			ss, err := structuralschema.NewStructural(internalSchema)
			if err != nil {
				return nil, fmt.Errorf("the schema of %s %s is not structural: %w", crd.Name, v.Name, err)
			}
			// Defaults that pruning would drop are not applied, as in
			// kube-apiserver.
			ss = ss.DeepCopy()
			if err := structuraldefaulting.PruneDefaults(ss); err != nil {
				return nil, fmt.Errorf("failed to prune the defaults of %s %s: %w", crd.Name, v.Name, err)
			}
			cv.structural = ss
		}
		var err error
		if cv.validator, _, err = apiservervalidation.NewSchemaValidator(internalSchema); err != nil {
			return nil, fmt.Errorf("failed to make the validator of %s %s: %w", crd.Name, v.Name, err)
		}
		if v.Subresources != nil && v.Subresources.Status != nil {
			cv.status = true
			if internalSchema != nil {
				if st, ok := internalSchema.Properties["status"]; ok {
					if cv.statusValidator, _, err = apiservervalidation.NewSchemaValidator(&st); err != nil {
						return nil, fmt.Errorf("failed to make the status validator of %s %s: %w", crd.Name, v.Name, err)
					}
				}
			}
		}
		if v.Subresources != nil && v.Subresources.Scale != nil {
			cv.scale = v.Subresources.Scale.DeepCopy()
		}
		if cv.structural != nil {
			// Compiles the rules once per CRD generation; nil without any.
			cv.cel = cel.NewValidator(cv.structural, true, celconfig.PerCallLimit)
		}
		columns := v.AdditionalPrinterColumns
		if len(columns) == 0 {
			// What kube-apiserver prints for a CRD without columns.
			columns = []apiextensionsv1.CustomResourceColumnDefinition{{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp"}}
		}
		if cv.table, err = tableconvertor.New(columns); err != nil {
			return nil, fmt.Errorf("failed to make the columns of %s %s: %w", crd.Name, v.Name, err)
		}
		s.versions = append(s.versions, cv)
	}
	return s, nil
}

// resources are the served versions as resources, named as the CRD's
// accepted names say.
func (s *crdServing) resources(crd *apiextensionsv1.CustomResourceDefinition) []*resource {
	names := crd.Status.AcceptedNames
	var out []*resource
	for _, cv := range s.versions {
		out = append(out, &resource{
			gv: cv.gv, name: names.Plural, singular: names.Singular, kind: names.Kind, namespaced: cv.namespaced,
			shortNames: names.ShortNames, categories: names.Categories, status: cv.status,
			custom: &customResource{crdVersion: cv, crdName: crd.Name, listKind: names.ListKind, terminating: crd.DeletionTimestamp != nil},
		})
	}
	return out
}

// listKind is the kind of a list of res.
func listKind(res *resource) string {
	if res.custom != nil && res.custom.listKind != "" {
		return res.custom.listKind
	}
	return res.kind + "List"
}

// newObject is an empty object of the resource's kind.
func newObject(res *resource) (runtime.Object, error) {
	if res.custom != nil {
		u := &unstructured.Unstructured{Object: map[string]any{}}
		u.SetGroupVersionKind(res.gvk())
		return u, nil
	}
	return apiScheme().New(res.gvk())
}

// inVersion is obj as the request's version shows it: a resource served
// from another one's storage converts it (convert.go); custom objects are
// stored in their CRD's storage version and, with no conversion webhook
// (strategy None), read in another served version by their apiVersion
// alone, as kube-apiserver converts them. obj is not modified (watch
// events share it with the store).
func inVersion(res *resource, obj *unstructured.Unstructured) *unstructured.Unstructured {
	if res != nil && res.conversion != nil && obj != nil && obj.GetAPIVersion() != res.gv.String() {
		out, err := res.conversion.fromStorage(obj.Object)
		if err != nil {
			// The store holds only what toStorage made: this is a bug.
			panic(fmt.Sprintf("converting a stored %s to %s: %v", obj.GetKind(), res.gv, err))
		}
		return &unstructured.Unstructured{Object: out}
	}
	if res == nil || res.custom == nil || obj == nil || obj.GetAPIVersion() == res.gv.String() {
		return obj
	}
	out := &unstructured.Unstructured{Object: make(map[string]any, len(obj.Object))}
	for k, v := range obj.Object {
		out.Object[k] = v
	}
	out.SetAPIVersion(res.gv.String())
	return out
}

// decodeCustom is what kube-apiserver's decoding does to a custom object:
// unknown fields pruned (x-kubernetes-preserve-unknown-fields and
// x-kubernetes-embedded-resource respected), nulls the schema does not
// allow dropped, defaults applied.
func (cv *crdVersion) decode(obj *unstructured.Unstructured) *unstructured.Unstructured {
	out := obj.DeepCopy()
	// The object's metadata as ObjectMeta has it (malformed fields
	// dropped), as kube-apiserver's decoding leaves it.
	if meta, _, err := schemaobjectmeta.GetObjectMeta(out.Object, true); err == nil && meta != nil {
		_ = schemaobjectmeta.SetObjectMeta(out.Object, meta)
	}
	if cv.structural == nil {
		return out
	}
	structuralpruning.Prune(out.Object, cv.structural, true)
	// Embedded resources' metadata likewise.
	_ = schemaobjectmeta.Coerce(nil, out.Object, cv.structural, false, true)
	structuraldefaulting.PruneNonNullableNullsWithoutDefaults(out.Object, cv.structural)
	structuraldefaulting.Default(out.Object, cv.structural)
	return out
}

// unknownFields are the paths of the fields of obj the schema prunes.
func (cv *crdVersion) unknownFields(obj *unstructured.Unstructured) []string {
	if cv.structural == nil {
		return nil
	}
	return structuralpruning.PruneWithOptions(obj.DeepCopy().Object, cv.structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})
}

// admitCustom validates what a write of a custom object would store, as
// the CR registry strategies do, and turns it into the storage version.
func admitCustom(req *request, live, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	cr := req.res.custom
	if live == nil && cr.terminating {
		return nil, apierrors.NewMethodNotSupported(schema.GroupResource{Group: req.res.gv.Group, Resource: req.res.name}, "create")
	}
	obj = cr.decode(obj)
	keepSystemFields(obj, live)
	obj.SetAPIVersion(req.res.gv.String())
	obj.SetKind(req.res.kind)
	if live == nil && cr.status {
		// A create cannot set the status of a kind with a status
		// subresource.
		delete(obj.Object, "status")
	}
	if errs := cr.validate(req.res, obj, inVersion(req.res, live), req.subresource == "status"); len(errs) > 0 {
		return nil, apierrors.NewInvalid(req.res.gvk().GroupKind(), obj.GetName(), errs)
	}
	obj.SetAPIVersion(cr.storage.String())
	return obj, nil
}

// keepSystemFields gives an update what the store keeps of the live object
// anyway (uid when the client sent none, creation and deletion times,
// generation), as kube-apiserver does before validating an update.
func keepSystemFields(obj, live *unstructured.Unstructured) {
	if live == nil {
		return
	}
	if obj.GetUID() == "" {
		obj.SetUID(live.GetUID())
	}
	obj.SetCreationTimestamp(live.GetCreationTimestamp())
	obj.SetDeletionTimestamp(live.GetDeletionTimestamp())
	obj.SetDeletionGracePeriodSeconds(live.GetDeletionGracePeriodSeconds())
	obj.SetGeneration(live.GetGeneration())
}

// validate checks a custom object as kube-apiserver's CR registry does,
// with apiextensions-apiserver's checks: type and object metadata, the
// OpenAPI schema (of the status alone for a status write), embedded
// resources' metadata, list-type invariants, the scale paths, and the
// x-kubernetes-validations rules (CEL) when nothing more basic failed.
// old is nil on create.
func (cv *crdVersion) validate(res *resource, obj, old *unstructured.Unstructured, statusWrite bool) field.ErrorList {
	var errs field.ErrorList
	if obj.GetKind() != res.kind {
		errs = append(errs, field.Invalid(field.NewPath("kind"), obj.GetKind(), "must be "+res.kind))
	}
	if obj.GetAPIVersion() != res.gv.String() {
		errs = append(errs, field.Invalid(field.NewPath("apiVersion"), obj.GetAPIVersion(), "must be "+res.gv.String()))
	}
	if len(errs) > 0 {
		return errs
	}
	metaPath := field.NewPath("metadata")
	var oldObject any
	switch {
	case old == nil:
		errs = append(errs, metavalidation.ValidateObjectMetaAccessor(obj, cv.namespaced, metavalidation.NameIsDNSSubdomain, metaPath)...)
		errs = append(errs, apiservervalidation.ValidateCustomResource(nil, obj.Object, cv.validator)...)
	case statusWrite:
		oldObject = old.Object
		errs = append(errs, metavalidation.ValidateObjectMetaAccessorUpdate(obj, old, metaPath)...)
		if status, ok := obj.Object["status"]; ok && cv.statusValidator != nil {
			errs = append(errs, apiservervalidation.ValidateCustomResourceUpdate(field.NewPath("status"), status, old.Object["status"], cv.statusValidator)...)
		}
	default:
		oldObject = old.Object
		errs = append(errs, metavalidation.ValidateObjectMetaAccessorUpdate(obj, old, metaPath)...)
		errs = append(errs, apiservervalidation.ValidateCustomResourceUpdate(nil, obj.Object, old.Object, cv.validator)...)
	}
	if cv.scale != nil {
		errs = append(errs, validateReplicas(obj, cv.scale.SpecReplicasPath, !statusWrite)...)
		errs = append(errs, validateReplicas(obj, cv.scale.StatusReplicasPath, true)...)
	}
	if cv.structural == nil {
		return errs
	}
	if !statusWrite {
		errs = append(errs, schemaobjectmeta.Validate(nil, obj.Object, cv.structural, false)...)
	}
	errs = append(errs, structurallisttype.ValidateListSetsAndMaps(nil, cv.structural, obj.Object)...)
	if cv.cel == nil {
		return errs
	}
	for _, e := range errs {
		switch e.Type {
		case field.ErrorTypeNotSupported, field.ErrorTypeRequired, field.ErrorTypeTooLong, field.ErrorTypeTooMany, field.ErrorTypeTypeInvalid:
			return append(errs, field.Invalid(nil, nil, "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"))
		}
	}
	celErrs, _ := cv.cel.Validate(context.Background(), nil, cv.structural, obj.Object, oldObject, celconfig.RuntimeCELCostBudget)
	return append(errs, celErrs...)
}

// validateReplicas checks a scale path holds a non-negative int32, when
// the object has it (a missing status path is not an error).
func validateReplicas(obj *unstructured.Unstructured, path string, check bool) field.ErrorList {
	if !check || path == "" {
		return nil
	}
	v, found, err := unstructured.NestedInt64(obj.Object, strings.Split(strings.TrimPrefix(path, "."), ".")...)
	switch {
	case err != nil:
		return field.ErrorList{field.Invalid(field.NewPath(path), v, err.Error())}
	case !found:
		return nil
	case v < 0:
		return field.ErrorList{field.Invalid(field.NewPath(path), v, "should be a non-negative integer")}
	case v > math.MaxInt32:
		return field.ErrorList{field.Invalid(field.NewPath(path), v, fmt.Sprintf("should be less than or equal to %v", math.MaxInt32))}
	}
	return nil
}

// checkCustomUnknownFields is checkUnknownFields for custom objects: the
// fields the schema prunes are unknown.
func checkCustomUnknownFields(w http.ResponseWriter, mode string, res *resource, obj *unstructured.Unstructured) error {
	unknown := res.custom.unknownFields(obj)
	if len(unknown) == 0 {
		return nil
	}
	if mode == metav1.FieldValidationStrict {
		msgs := make([]string, len(unknown))
		for i, u := range unknown {
			msgs[i] = fmt.Sprintf("unknown field %q", u)
		}
		return apierrors.NewBadRequest("strict decoding error: " + strings.Join(msgs, ", "))
	}
	for _, u := range unknown {
		w.Header().Add("Warning", fmt.Sprintf("299 - %q", fmt.Sprintf("unknown field %q", u)))
	}
	return nil
}

// fieldManager is the field manager of a custom kind and subresource,
// kept with the CRD generation. Objects are unstructured; their structure
// is deduced from them (lists atomic, maps by key) rather than read from
// the schema's list types.
func (cv *crdVersion) fieldManager(res *resource, subresource string) (*managedfields.FieldManager, error) {
	cv.fieldManagersMu.Lock()
	defer cv.fieldManagersMu.Unlock()
	if fm, ok := cv.fieldManagers[subresource]; ok {
		return fm, nil
	}
	var reset map[fieldpath.APIVersion]fieldpath.Filter
	if cv.status {
		excluded := fieldpath.MakePathOrDie("status")
		if subresource == "status" {
			excluded = fieldpath.MakePathOrDie("spec")
		}
		reset = map[fieldpath.APIVersion]fieldpath.Filter{
			fieldpath.APIVersion(res.gv.String()): fieldpath.NewExcludeSetFilter(fieldpath.NewSet(excluded)),
		}
	}
	fm, err := managedfields.NewDefaultFieldManager(managedfields.NewDeducedTypeConverter(), unstructuredConvertor{}, unstructuredDefaulter{},
		unstructuredCreater{}, res.gvk(), cv.storage, subresource, reset)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("failed to make the field manager of %s: %w", res.kind, err))
	}
	cv.fieldManagers[subresource] = fm
	return fm, nil
}

// customTable is the Table of custom objects: the CRD's
// additionalPrinterColumns, rows carrying PartialObjectMetadata.
func customTable(res *resource, items []*unstructured.Unstructured, rv string) (*metav1.Table, error) {
	list := &unstructured.UnstructuredList{Object: map[string]any{"apiVersion": res.gv.String(), "kind": listKind(res)}}
	list.SetResourceVersion(rv)
	for _, i := range items {
		list.Items = append(list.Items, *inVersion(res, i))
	}
	t, err := res.custom.table.ConvertToTable(context.Background(), list, nil)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("failed to print the %s: %w", res.name, err))
	}
	t.TypeMeta = metav1.TypeMeta{Kind: "Table", APIVersion: "meta.k8s.io/v1"}
	for i := range t.Rows {
		t.Rows[i].Object = runtime.RawExtension{Object: &unstructured.Unstructured{Object: partialObjectMetadata(&list.Items[i])}}
	}
	return t, nil
}

// The conversion, defaulting and creation the field manager needs, for
// unstructured custom objects whose versions differ by apiVersion alone.
type (
	unstructuredConvertor struct{}
	unstructuredDefaulter struct{}
	unstructuredCreater   struct{}
)

func (unstructuredConvertor) Convert(in, out, _ any) error {
	src, ok1 := in.(*unstructured.Unstructured)
	dst, ok2 := out.(*unstructured.Unstructured)
	if !ok1 || !ok2 {
		return fmt.Errorf("cannot convert %T to %T", in, out)
	}
	dst.Object = runtime.DeepCopyJSON(src.Object)
	return nil
}

func (unstructuredConvertor) ConvertToVersion(in runtime.Object, target runtime.GroupVersioner) (runtime.Object, error) {
	u, ok := in.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("cannot convert %T", in)
	}
	gvk, ok := target.KindForGroupVersionKinds([]schema.GroupVersionKind{u.GroupVersionKind()})
	if !ok {
		return nil, fmt.Errorf("cannot convert %s to %v", u.GroupVersionKind(), target)
	}
	out := u.DeepCopy()
	out.SetGroupVersionKind(gvk)
	return out, nil
}

func (unstructuredConvertor) ConvertFieldLabel(_ schema.GroupVersionKind, label, value string) (string, string, error) {
	return label, value, nil
}

func (unstructuredDefaulter) Default(runtime.Object) {}

func (unstructuredCreater) New(kind schema.GroupVersionKind) (runtime.Object, error) {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetGroupVersionKind(kind)
	return u, nil
}
