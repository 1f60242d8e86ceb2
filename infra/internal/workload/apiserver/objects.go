package apiserver

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	pathvalidation "k8s.io/apimachinery/pkg/api/validation/path"
	metainternalversionscheme "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
)

// finish turns what a write asks for into what is stored: the status
// subresource rules, the typed round trip (unknown fields dropped, types
// checked), managedFields for the manager, and the defaults
// kube-apiserver sets on create.
func (h *Handler) finish(req *request, manager string, live, next *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	if live != nil {
		next = keepSubresourceFields(req, live, next)
	}
	nextTyped, err := typed(req.res, next)
	if err != nil {
		return nil, err
	}
	var liveTyped runtime.Object
	if live != nil {
		if liveTyped, err = typed(req.res, live); err != nil {
			return nil, err
		}
	} else {
		liveTyped, _ = newObject(req.res)
	}
	fm, err := h.fieldManager(req.res, req.subresource)
	if err != nil {
		return nil, err
	}
	out, err := toUnstructured(req.res, fm.UpdateNoErrors(liveTyped, nextTyped, manager))
	if err != nil {
		return nil, err
	}
	if live == nil {
		defaultOnCreate(req.res, out)
	}
	return h.admit(req, live, out)
}

// defaultOnCreate sets what kube-apiserver's registry sets on new objects
// and clients read.
func defaultOnCreate(res *resource, obj *unstructured.Unstructured) {
	// (Namespaces get theirs from the store, which also makes the initial ones.)
	defaultBuiltin(res, obj)
	if res.gv == coreV1 && res.name == "pods" {
		if phase, _, _ := unstructured.NestedString(obj.Object, "status", "phase"); phase == "" {
			_ = unstructured.SetNestedField(obj.Object, "Pending", "status", "phase")
		}
	}
}

func (h *Handler) get(w http.ResponseWriter, r *http.Request, req *request) {
	obj, err := req.store.Get(req.res.storeResource(), req.namespace, req.name)
	if err != nil {
		writeError(w, err)
		return
	}
	obj = inVersion(req.res, obj)
	switch responseShape(r) {
	case shapeTable:
		writeJSON(w, http.StatusOK, table(req.res, []*unstructured.Unstructured{obj}, obj.GetResourceVersion()))
		return
	case shapeMetadata:
		writeJSON(w, http.StatusOK, partialObjectMetadata(obj))
		return
	}
	writeJSON(w, http.StatusOK, obj.Object)
}

// selectors are the request's label and field selectors, the field
// selector in the labels of the resource's storage.
func selectors(r *http.Request, res *resource) (labels.Selector, fields.Selector, error) {
	q := r.URL.Query()
	ls, err := labels.Parse(q.Get("labelSelector"))
	if err != nil {
		return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("invalid labelSelector: %v", err))
	}
	fs, err := fields.ParseSelector(q.Get("fieldSelector"))
	if err != nil {
		return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("invalid fieldSelector: %v", err))
	}
	if fs, err = storageFieldSelector(res, fs); err != nil {
		return nil, nil, err
	}
	return ls, fs, nil
}

func (h *Handler) list(w http.ResponseWriter, r *http.Request, req *request) {
	ls, fs, err := selectors(r, req.res)
	if err != nil {
		writeError(w, err)
		return
	}
	q := r.URL.Query()
	var limit int64
	if v := q.Get("limit"); v != "" {
		if limit, err = strconv.ParseInt(v, 10, 64); err != nil || limit < 0 {
			writeError(w, apierrors.NewBadRequest("invalid limit: "+v))
			return
		}
	}
	page, err := req.store.ListPage(req.res.storeResource(), req.namespace, store.ListOptions{
		LabelSelector: ls, FieldSelector: fs,
		ResourceVersion: q.Get("resourceVersion"), ResourceVersionMatch: metav1.ResourceVersionMatch(q.Get("resourceVersionMatch")),
	}, limit, q.Get("continue"))
	if err != nil {
		writeError(w, err)
		return
	}
	items, rv := page.Items, page.ResourceVersion
	listMeta := map[string]any{"resourceVersion": rv}
	if page.Continue != "" {
		listMeta["continue"] = page.Continue
		listMeta["remainingItemCount"] = *page.RemainingItemCount
	}
	objs := make([]any, 0, len(items))
	apiVersion, kind := req.res.gv.String(), listKind(req.res)
	switch responseShape(r) {
	case shapeTable:
		t := table(req.res, items, rv)
		t.Continue, t.RemainingItemCount = page.Continue, page.RemainingItemCount
		writeJSON(w, http.StatusOK, t)
		return
	case shapeMetadata:
		apiVersion, kind = "meta.k8s.io/v1", "PartialObjectMetadataList"
		for _, i := range items {
			objs = append(objs, partialObjectMetadata(i))
		}
	default:
		for _, i := range items {
			objs = append(objs, inVersion(req.res, i).Object)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"apiVersion": apiVersion,
		"kind":       kind,
		"metadata":   listMeta,
		"items":      objs,
	})
}

func (h *Handler) create(w http.ResponseWriter, r *http.Request, req *request) {
	wo, obj, err := decodeWrite(r)
	if err != nil {
		writeError(w, err)
		return
	}
	if err := checkKind(req.res, obj); err != nil {
		writeError(w, err)
		return
	}
	if obj.GetResourceVersion() != "" {
		writeError(w, apierrors.NewBadRequest("resourceVersion should not be set on objects to be created"))
		return
	}
	if err := validateName(req.res, obj); err != nil {
		writeError(w, err)
		return
	}
	if req.res.namespaced {
		if obj.GetNamespace() != "" && obj.GetNamespace() != req.namespace {
			writeError(w, apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request"))
			return
		}
		obj.SetNamespace(req.namespace)
	}
	if err := checkUnknownFields(w, r, req.res, obj); err != nil {
		writeError(w, err)
		return
	}
	obj, err = h.finish(req, fieldManagerName(r), nil, obj)
	if err != nil {
		writeError(w, err)
		return
	}
	if obj, err = toStorage(req.res, obj); err != nil {
		writeError(w, err)
		return
	}
	created, err := req.store.Create(req.res.storeResource(), obj, wo...)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, inVersion(req.res, created).Object)
}

// checkIdentity makes the object's name and namespace the URL's, refusing
// a body that names another object.
func checkIdentity(req *request, obj *unstructured.Unstructured) error {
	if obj.GetName() != req.name {
		return apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", obj.GetName(), req.name))
	}
	if req.res.namespaced {
		if obj.GetNamespace() != "" && obj.GetNamespace() != req.namespace {
			return apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
		}
		obj.SetNamespace(req.namespace)
	}
	return nil
}

// guaranteedUpdate reads the live object, derives the next one with mutate
// and stores it; a conflict the request did not ask for (it set no
// resourceVersion of its own) is retried on a fresh read.
func (h *Handler) guaranteedUpdate(req *request, wo []store.WriteOption, mutate func(live *unstructured.Unstructured) (*unstructured.Unstructured, error)) (*unstructured.Unstructured, error) {
	for attempt := 0; ; attempt++ {
		live, err := req.store.Get(req.res.storeResource(), req.namespace, req.name)
		if err != nil {
			return nil, err
		}
		live = inVersion(req.res, live)
		next, err := mutate(live)
		if err != nil {
			return nil, err
		}
		conditional := next.GetResourceVersion() != "" && next.GetResourceVersion() != live.GetResourceVersion()
		if next.GetResourceVersion() == "" {
			next.SetResourceVersion(live.GetResourceVersion())
		}
		if next, err = toStorage(req.res, next); err != nil {
			return nil, err
		}
		out, err := req.store.Update(req.res.storeResource(), next, wo...)
		if apierrors.IsConflict(err) && !conditional && attempt < maxConflictRetries {
			continue
		}
		return inVersion(req.res, out), err
	}
}

func (h *Handler) update(w http.ResponseWriter, r *http.Request, req *request) {
	wo, body, err := decodeWrite(r)
	if err != nil {
		writeError(w, err)
		return
	}
	if err := checkKind(req.res, body); err != nil {
		writeError(w, err)
		return
	}
	if err := checkIdentity(req, body); err != nil {
		writeError(w, err)
		return
	}
	if err := checkUnknownFields(w, r, req.res, body); err != nil {
		writeError(w, err)
		return
	}
	manager := fieldManagerName(r)
	out, err := h.guaranteedUpdate(req, wo, func(live *unstructured.Unstructured) (*unstructured.Unstructured, error) {
		return h.finish(req, manager, live, body.DeepCopy())
	})
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out.Object)
}

// deleteOptions reads the optional DeleteOptions body, or without one the
// query's parameters (propagationPolicy, orphanDependents, ...), as
// kube-apiserver does; dryRun may come in the query either way.
func deleteOptions(r *http.Request) (*metav1.DeleteOptions, error) {
	opts := &metav1.DeleteOptions{}
	defer func() {
		if len(opts.DryRun) == 0 {
			opts.DryRun = r.URL.Query()["dryRun"]
		}
	}()
	var body *unstructured.Unstructured
	if r.ContentLength != 0 {
		var err error
		if body, err = decodeObject(r); err != nil {
			return nil, err
		}
	}
	if body == nil || len(body.Object) == 0 {
		if err := metainternalversionscheme.ParameterCodec.DecodeParameters(r.URL.Query(), metav1.SchemeGroupVersion, opts); err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		return opts, nil
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(body.Object, opts); err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("failed to decode the DeleteOptions: %v", err))
	}
	return opts, nil
}

// deleteWriteOptions validates DeleteOptions as kube-apiserver does (422
// for a bad propagationPolicy, or one set with orphanDependents) and turns
// them into the store's: the legacy orphanDependents is Orphan when true,
// Background when false.
func deleteWriteOptions(opts *metav1.DeleteOptions) ([]store.WriteOption, error) {
	if errs := metav1validation.ValidateDeleteOptions(opts); len(errs) > 0 {
		return nil, apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "DeleteOptions"}, "", errs)
	}
	wo, err := dryRun(opts.DryRun)
	if err != nil {
		return nil, err
	}
	//nolint:staticcheck // SA1019: the legacy option is still honoured, as kube-apiserver does.
	switch orphan := opts.OrphanDependents; {
	case opts.PropagationPolicy != nil:
		wo = append(wo, store.Propagation(*opts.PropagationPolicy))
	case orphan != nil && *orphan:
		wo = append(wo, store.Propagation(metav1.DeletePropagationOrphan))
	case orphan != nil:
		wo = append(wo, store.Propagation(metav1.DeletePropagationBackground))
	}
	return wo, nil
}

// deleteCode is 202 Accepted for an object left in place by a request
// with orphanDependents=false, as kube-apiserver answers, else 200.
func deleteCode(opts *metav1.DeleteOptions, gone bool) int {
	//nolint:staticcheck // SA1019: the legacy option decides the code.
	if !gone && opts.OrphanDependents != nil && !*opts.OrphanDependents {
		return http.StatusAccepted
	}
	return http.StatusOK
}

func preconditions(opts *metav1.DeleteOptions) store.Preconditions {
	var pre store.Preconditions
	if opts != nil && opts.Preconditions != nil {
		if opts.Preconditions.UID != nil {
			pre.UID = *opts.Preconditions.UID
		}
		if opts.Preconditions.ResourceVersion != nil {
			pre.ResourceVersion = *opts.Preconditions.ResourceVersion
		}
	}
	return pre
}

// delete deletes as kube-apiserver does: the propagation policy decides
// what the store's garbage collector does with the object's dependents
// (Background: after it, Foreground: before it, Orphan: they stay); a Pod
// bound to a Node is deleted gracefully (podGracePeriod), its kubelet (the
// workload controllers) ending it.
func (h *Handler) delete(w http.ResponseWriter, r *http.Request, req *request) {
	opts, err := deleteOptions(r)
	if err != nil {
		writeError(w, err)
		return
	}
	wo, err := deleteWriteOptions(opts)
	if err != nil {
		writeError(w, err)
		return
	}
	if isPods(req.res) {
		if live, err := req.store.Get(req.res.storeResource(), req.namespace, req.name); err == nil {
			wo = append(wo, store.GracePeriod(podGracePeriod(opts, live)))
		}
	}
	obj, gone, err := req.store.Delete(req.res.storeResource(), req.namespace, req.name, preconditions(opts), wo...)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, deleteCode(opts, gone), inVersion(req.res, obj).Object)
}

func (h *Handler) deleteCollection(w http.ResponseWriter, r *http.Request, req *request) {
	opts, err := deleteOptions(r)
	if err != nil {
		writeError(w, err)
		return
	}
	wo, err := deleteWriteOptions(opts)
	if err != nil {
		writeError(w, err)
		return
	}
	ls, fs, err := selectors(r, req.res)
	if err != nil {
		writeError(w, err)
		return
	}
	items, _, err := req.store.List(req.res.storeResource(), req.namespace, store.ListOptions{LabelSelector: ls, FieldSelector: fs})
	if err != nil {
		writeError(w, err)
		return
	}
	deleted := make([]any, 0, len(items))
	for _, i := range items {
		iwo := wo
		if isPods(req.res) {
			iwo = append(slices.Clip(wo), store.GracePeriod(podGracePeriod(opts, i)))
		}
		obj, _, err := req.store.Delete(req.res.storeResource(), i.GetNamespace(), i.GetName(), preconditions(opts), iwo...)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			writeError(w, err)
			return
		}
		deleted = append(deleted, inVersion(req.res, obj).Object)
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"apiVersion": req.res.gv.String(),
		"kind":       listKind(req.res),
		"metadata":   map[string]any{"resourceVersion": req.store.ResourceVersion()},
		"items":      deleted,
	})
}

func isPods(res *resource) bool { return res.gv == coreV1 && res.name == "pods" }

// podGracePeriod is the grace period kube-apiserver's Pod strategy gives
// a deletion: the request's gracePeriodSeconds, else the Pod's
// terminationGracePeriodSeconds (30 when unset); 0 for a Pod bound to no
// Node or already finished, which no kubelet is to stop. A negative
// period is 1, as kube-apiserver makes it.
func podGracePeriod(opts *metav1.DeleteOptions, pod *unstructured.Unstructured) int64 {
	node, _, _ := unstructured.NestedString(pod.Object, "spec", "nodeName")
	phase, _, _ := unstructured.NestedString(pod.Object, "status", "phase")
	if node == "" || phase == "Succeeded" || phase == "Failed" {
		return 0
	}
	if g := opts.GracePeriodSeconds; g != nil {
		if *g < 0 {
			return 1
		}
		return *g
	}
	if g, found, _ := unstructured.NestedInt64(pod.Object, "spec", "terminationGracePeriodSeconds"); found {
		return g
	}
	return 30
}

// validateName applies kube-apiserver's name rules: namespaces are DNS
// labels, RBAC objects path segments (system:controller:... names), the
// rest DNS subdomains.
func validateName(res *resource, obj *unstructured.Unstructured) error {
	name, path := obj.GetName(), field.NewPath("metadata", "name")
	if name == "" {
		name, path = obj.GetGenerateName(), field.NewPath("metadata", "generateName")
		if name == "" {
			return nil // the store answers the missing name
		}
		// A prefix may end where a suffix will follow.
		name = strings.TrimSuffix(name, "-") + "x"
	}
	var msgs []string
	switch {
	case res.gv == coreV1 && res.name == "namespaces":
		msgs = validation.IsDNS1123Label(name)
	case res.gv == rbacV1:
		msgs = pathvalidation.IsValidPathSegmentName(name)
	default:
		msgs = validation.IsDNS1123Subdomain(name)
	}
	if len(msgs) == 0 {
		return nil
	}
	var errs field.ErrorList
	for _, m := range msgs {
		errs = append(errs, field.Invalid(path, obj.GetName()+obj.GetGenerateName(), m))
	}
	return apierrors.NewInvalid(res.gvk().GroupKind(), obj.GetName(), errs)
}
