package apiserver

import (
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"unicode"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	pathvalidation "k8s.io/apimachinery/pkg/api/validation/path"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
)

// maxBodyBytes is kube-apiserver's limit on request bodies.
const maxBodyBytes = 3 * 1024 * 1024

// maxConflictRetries bounds the retries of a read-modify-write that the
// client did not make conditional, as kube-apiserver's GuaranteedUpdate retries.
const maxConflictRetries = 10

func readBody(r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes+1))
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("failed to read the request body: %v", err))
	}
	if len(body) > maxBodyBytes {
		return nil, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("limit is %d", maxBodyBytes))
	}
	return body, nil
}

func unsupportedMediaType(contentType string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusUnsupportedMediaType, Reason: metav1.StatusReasonUnsupportedMediaType,
		Message: fmt.Sprintf("the body of the request was in an unknown format - accepted media types include: application/json (got %q)", contentType),
	}}
}

// decodeObject reads an object body: JSON, or protobuf (client-go's
// typed clients send built-in kinds as protobuf). Responses are JSON
// whatever the request's encoding; clients read the response's Content-Type.
func decodeObject(r *http.Request) (*unstructured.Unstructured, error) {
	ct := r.Header.Get("Content-Type")
	mt := "application/json"
	if ct != "" {
		var err error
		if mt, _, err = mime.ParseMediaType(ct); err != nil {
			return nil, unsupportedMediaType(ct)
		}
	}
	body, err := readBody(r)
	if err != nil {
		return nil, err
	}
	switch mt {
	case "application/json":
		return decodeJSONObject(body)
	case runtime.ContentTypeProtobuf:
		return decodeProtobuf(body)
	default:
		return nil, unsupportedMediaType(ct)
	}
}

func decodeProtobuf(body []byte) (*unstructured.Unstructured, error) {
	info, ok := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	if !ok {
		return nil, unsupportedMediaType(runtime.ContentTypeProtobuf)
	}
	obj, gvk, err := info.Serializer.Decode(body, nil, nil)
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("failed to decode the protobuf object: %v", err))
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("failed to convert the protobuf object: %v", err))
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(*gvk)
	return u, nil
}

func decodeJSONObject(body []byte) (*unstructured.Unstructured, error) {
	obj := map[string]any{}
	if err := utiljson.Unmarshal(body, &obj); err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("failed to decode the object: %v", err))
	}
	return &unstructured.Unstructured{Object: obj}, nil
}

// checkKind refuses an object of another kind than the resource's, and
// fills apiVersion and kind when the client left them out.
func checkKind(res *resource, obj *unstructured.Unstructured) error {
	if obj.GetAPIVersion() == "" {
		obj.SetAPIVersion(res.gv.String())
	}
	if obj.GetKind() == "" {
		obj.SetKind(res.kind)
	}
	if obj.GetAPIVersion() != res.gv.String() || obj.GetKind() != res.kind {
		return apierrors.NewBadRequest(fmt.Sprintf("the object is a %s %s, the request is for %s %s",
			obj.GetAPIVersion(), obj.GetKind(), res.gv.String(), res.kind))
	}
	return nil
}

// typed decodes an object into its client-go type: what kube-apiserver's
// decoding does, refusing wrongly typed fields with a 400.
func typed(res *resource, obj *unstructured.Unstructured) (runtime.Object, error) {
	out, err := scheme.Scheme.New(res.gvk())
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("failed to make a %s: %w", res.kind, err))
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, out); err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("failed to decode the %s: %v", res.kind, err))
	}
	out.GetObjectKind().SetGroupVersionKind(res.gvk())
	return out, nil
}

func toUnstructured(res *resource, obj runtime.Object) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("failed to encode the %s: %w", res.kind, err))
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(res.gvk())
	return u, nil
}

// fieldManagerName is the request's fieldManager, or as kube-apiserver does
// the User-Agent up to its first slash.
func fieldManagerName(r *http.Request) string {
	if m := r.URL.Query().Get("fieldManager"); m != "" {
		return m
	}
	ua := strings.Split(r.Header.Get("User-Agent"), "/")[0]
	var b strings.Builder
	for _, c := range ua {
		if unicode.IsPrint(c) && b.Len() < 128 {
			b.WriteRune(c)
		}
	}
	return b.String()
}

// dryRun reads the dryRun parameter (All is its one valid value) into
// the store's write options.
func dryRun(values []string) ([]store.WriteOption, error) {
	switch {
	case len(values) == 0:
		return nil, nil
	case len(values) == 1 && values[0] == metav1.DryRunAll:
		return []store.WriteOption{store.DryRun()}, nil
	}
	return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid dryRun %v: the supported value is All", values))
}

// finish turns what a write asks for into what is stored: the status
// subresource rules, the typed round trip (unknown fields dropped, types
// checked), managedFields for the manager, and the defaults
// kube-apiserver sets on create.
func (h *Handler) finish(req *request, manager string, live, next *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	if live != nil && req.res.status {
		if req.subresource == "status" {
			// A status write changes only the status.
			merged := live.DeepCopy()
			copyField(merged, next, "status")
			merged.SetResourceVersion(next.GetResourceVersion())
			next = merged
		} else {
			copyField(next, live, "status")
		}
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
		liveTyped, _ = scheme.Scheme.New(req.res.gvk())
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
	return out, nil
}

// copyField sets dst's top-level field to src's (removing it when src has none).
func copyField(dst, src *unstructured.Unstructured, name string) {
	if v, ok := src.Object[name]; ok {
		dst.Object[name] = runtime.DeepCopyJSONValue(v)
	} else {
		delete(dst.Object, name)
	}
}

// defaultOnCreate sets what kube-apiserver's registry sets on new objects
// and clients read.
func defaultOnCreate(res *resource, obj *unstructured.Unstructured) {
	// (Namespaces get theirs from the store, which also makes the initial ones.)
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

func selectors(r *http.Request) (labels.Selector, fields.Selector, error) {
	q := r.URL.Query()
	ls, err := labels.Parse(q.Get("labelSelector"))
	if err != nil {
		return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("invalid labelSelector: %v", err))
	}
	fs, err := fields.ParseSelector(q.Get("fieldSelector"))
	if err != nil {
		return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("invalid fieldSelector: %v", err))
	}
	return ls, fs, nil
}

func (h *Handler) list(w http.ResponseWriter, r *http.Request, req *request) {
	ls, fs, err := selectors(r)
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
	apiVersion, kind := req.res.gv.String(), req.res.kind+"List"
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
			objs = append(objs, i.Object)
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
	wo, err := dryRun(r.URL.Query()["dryRun"])
	if err != nil {
		writeError(w, err)
		return
	}
	obj, err := decodeObject(r)
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
	obj, err = h.finish(req, fieldManagerName(r), nil, obj)
	if err != nil {
		writeError(w, err)
		return
	}
	created, err := req.store.Create(req.res.storeResource(), obj, wo...)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, created.Object)
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
		next, err := mutate(live)
		if err != nil {
			return nil, err
		}
		conditional := next.GetResourceVersion() != "" && next.GetResourceVersion() != live.GetResourceVersion()
		if next.GetResourceVersion() == "" {
			next.SetResourceVersion(live.GetResourceVersion())
		}
		out, err := req.store.Update(req.res.storeResource(), next, wo...)
		if apierrors.IsConflict(err) && !conditional && attempt < maxConflictRetries {
			continue
		}
		return out, err
	}
}

func (h *Handler) update(w http.ResponseWriter, r *http.Request, req *request) {
	wo, err := dryRun(r.URL.Query()["dryRun"])
	if err != nil {
		writeError(w, err)
		return
	}
	body, err := decodeObject(r)
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

// deleteOptions reads the optional DeleteOptions body.
// dryRun may come in the body or the query, as kube-apiserver accepts.
func deleteOptions(r *http.Request) (*metav1.DeleteOptions, error) {
	opts := &metav1.DeleteOptions{}
	defer func() {
		if len(opts.DryRun) == 0 {
			opts.DryRun = r.URL.Query()["dryRun"]
		}
	}()
	if r.ContentLength == 0 {
		return opts, nil
	}
	body, err := decodeObject(r)
	if err != nil {
		return nil, err
	}
	if len(body.Object) == 0 {
		return opts, nil
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(body.Object, opts); err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("failed to decode the DeleteOptions: %v", err))
	}
	return opts, nil
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

// delete deletes at once: there is no kubelet to wait for and no garbage
// collector, so grace periods and propagation policies change nothing.
func (h *Handler) delete(w http.ResponseWriter, r *http.Request, req *request) {
	opts, err := deleteOptions(r)
	if err != nil {
		writeError(w, err)
		return
	}
	wo, err := dryRun(opts.DryRun)
	if err != nil {
		writeError(w, err)
		return
	}
	obj, _, err := req.store.Delete(req.res.storeResource(), req.namespace, req.name, preconditions(opts), wo...)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, obj.Object)
}

func (h *Handler) deleteCollection(w http.ResponseWriter, r *http.Request, req *request) {
	opts, err := deleteOptions(r)
	if err != nil {
		writeError(w, err)
		return
	}
	wo, err := dryRun(opts.DryRun)
	if err != nil {
		writeError(w, err)
		return
	}
	ls, fs, err := selectors(r)
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
		obj, _, err := req.store.Delete(req.res.storeResource(), i.GetNamespace(), i.GetName(), preconditions(opts), wo...)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			writeError(w, err)
			return
		}
		deleted = append(deleted, obj.Object)
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"apiVersion": req.res.gv.String(),
		"kind":       req.res.kind + "List",
		"metadata":   map[string]any{"resourceVersion": req.store.ResourceVersion()},
		"items":      deleted,
	})
}

// evict deletes the pod unless a PodDisruptionBudget forbids it, and
// answers as kube-apiserver does.
func (h *Handler) evict(w http.ResponseWriter, r *http.Request, req *request) {
	wo, err := dryRun(r.URL.Query()["dryRun"])
	if err != nil {
		writeError(w, err)
		return
	}
	body, err := decodeObject(r)
	if err != nil {
		writeError(w, err)
		return
	}
	if body.GetKind() != "" && body.GetKind() != "Eviction" {
		writeError(w, apierrors.NewBadRequest(fmt.Sprintf("the body is a %s, not an Eviction", body.GetKind())))
		return
	}
	if body.GetName() != req.name {
		writeError(w, apierrors.NewBadRequest("name in URL does not match name in Eviction object"))
		return
	}
	var opts *metav1.DeleteOptions
	if raw, ok := body.Object["deleteOptions"].(map[string]any); ok {
		opts = &metav1.DeleteOptions{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, opts); err != nil {
			writeError(w, apierrors.NewBadRequest(fmt.Sprintf("failed to decode the Eviction's deleteOptions: %v", err)))
			return
		}
	}
	pod, err := req.store.Get(req.res.storeResource(), req.namespace, req.name)
	if err != nil {
		writeError(w, err)
		return
	}
	if opts != nil && len(opts.DryRun) > 0 {
		if wo, err = dryRun(opts.DryRun); err != nil {
			writeError(w, err)
			return
		}
	}
	if err := h.checkDisruptionBudget(req.store, pod, wo); err != nil {
		writeError(w, err)
		return
	}
	if _, _, err := req.store.Delete(req.res.storeResource(), req.namespace, req.name, preconditions(opts), wo...); err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, &metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusSuccess, Code: http.StatusCreated,
	})
}

var pdbResource = lookup(policyV1, "poddisruptionbudgets")

// checkDisruptionBudget is the eviction subresource's budget check: a pod
// that has finished needs none; one budget selecting the pod must allow a
// disruption (which this eviction then uses up); more than one is an error.
func (h *Handler) checkDisruptionBudget(s *store.Store, pod *unstructured.Unstructured, wo []store.WriteOption) error {
	phase, _, _ := unstructured.NestedString(pod.Object, "status", "phase")
	if phase == string(corev1.PodSucceeded) || phase == string(corev1.PodFailed) {
		return nil
	}
	pdbs, _, err := s.List(pdbResource.storeResource(), pod.GetNamespace(), store.ListOptions{})
	if err != nil {
		return err
	}
	var matching []*policyv1.PodDisruptionBudget
	for _, u := range pdbs {
		pdb := &policyv1.PodDisruptionBudget{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, pdb); err != nil {
			return apierrors.NewInternalError(fmt.Errorf("failed to decode PodDisruptionBudget %s: %w", u.GetName(), err))
		}
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || sel.Empty() {
			continue
		}
		if sel.Matches(labels.Set(pod.GetLabels())) {
			matching = append(matching, pdb)
		}
	}
	switch {
	case len(matching) == 0:
		return nil
	case len(matching) > 1:
		return apierrors.NewInternalError(fmt.Errorf("this pod has more than one PodDisruptionBudget, which the eviction subresource does not support"))
	}
	pdb := matching[0]
	if pdb.Status.ObservedGeneration < pdb.Generation {
		return apierrors.NewTooManyRequests(fmt.Sprintf("Cannot evict pod as it would violate the pod's disruption budget. The disruption budget %s is still being processed by the server.", pdb.Name), 10)
	}
	if pdb.Status.DisruptionsAllowed <= 0 {
		return apierrors.NewTooManyRequests(fmt.Sprintf("Cannot evict pod as it would violate the pod's disruption budget. The disruption budget %s needs %d healthy pods and has %d currently", pdb.Name, pdb.Status.DesiredHealthy, pdb.Status.CurrentHealthy), 10)
	}
	pdb.Status.DisruptionsAllowed--
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(pdb)
	if err != nil {
		return apierrors.NewInternalError(fmt.Errorf("failed to encode PodDisruptionBudget %s: %w", pdb.Name, err))
	}
	next := &unstructured.Unstructured{Object: u}
	next.SetGroupVersionKind(pdbResource.gvk())
	// The resourceVersion read above guards against a concurrent eviction
	// using the same disruption: that one gets a 409 and retries.
	if _, err := s.Update(pdbResource.storeResource(), next, wo...); err != nil {
		return err
	}
	return nil
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
