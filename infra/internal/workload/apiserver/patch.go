package apiserver

import (
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"

	jsonpatch "github.com/evanphx/json-patch/v5"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/applyconfigurations"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/yaml"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
)

type fieldManagerKey struct {
	gvk         schema.GroupVersionKind
	subresource string
}

// newTypeConverter knows the schema of every client-go type, which
// server-side apply merges by.
func newTypeConverter() managedfields.TypeConverter {
	return applyconfigurations.NewTypeConverter(scheme.Scheme)
}

// fieldManager is the (stateless, shared) field manager of a kind and
// subresource. As in kube-apiserver, appliers of the main resource do not
// own status, and appliers of status own only status.
func (h *Handler) fieldManager(res *resource, subresource string) (*managedfields.FieldManager, error) {
	if res.custom != nil {
		return res.custom.fieldManager(res, subresource)
	}
	k := fieldManagerKey{gvk: res.gvk(), subresource: subresource}
	h.fieldManagersMu.Lock()
	defer h.fieldManagersMu.Unlock()
	if fm, ok := h.fieldManagers[k]; ok {
		return fm, nil
	}
	var reset map[fieldpath.APIVersion]fieldpath.Filter
	if res.status {
		excluded := fieldpath.MakePathOrDie("status")
		if subresource == "status" {
			excluded = fieldpath.MakePathOrDie("spec")
		}
		reset = map[fieldpath.APIVersion]fieldpath.Filter{
			fieldpath.APIVersion(res.gv.String()): fieldpath.NewExcludeSetFilter(fieldpath.NewSet(excluded)),
		}
	}
	fm, err := managedfields.NewDefaultFieldManager(h.typeConverterFor(res), objectConvertor{scheme.Scheme}, scheme.Scheme, scheme.Scheme,
		res.gvk(), res.gv, subresource, reset)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("failed to make the field manager of %s: %w", res.kind, err))
	}
	h.fieldManagers[k] = fm
	return fm, nil
}

func (h *Handler) patch(w http.ResponseWriter, r *http.Request, req *request) {
	wo, err := dryRun(r.URL.Query()["dryRun"])
	if err != nil {
		writeError(w, err)
		return
	}
	ct := r.Header.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		writeError(w, unsupportedMediaType(ct))
		return
	}
	patchType := types.PatchType(mt)
	switch patchType {
	case types.JSONPatchType, types.MergePatchType, types.StrategicMergePatchType, types.ApplyYAMLPatchType, types.ApplyCBORPatchType:
	default:
		writeError(w, unsupportedMediaType(ct))
		return
	}
	if patchType == types.ApplyCBORPatchType {
		writeError(w, unsupportedMediaType(ct))
		return
	}
	body, err := readBody(r)
	if err != nil {
		writeError(w, err)
		return
	}
	manager := fieldManagerName(r)
	if patchType == types.ApplyYAMLPatchType {
		h.apply(w, r, req, body, wo)
		return
	}
	attempt := 0 // warnings are written once, not on every retry
	out, err := h.guaranteedUpdate(req, wo, func(live *unstructured.Unstructured) (*unstructured.Unstructured, error) {
		patched, err := applyPatch(req.res, patchType, live, body)
		if err != nil {
			return nil, err
		}
		// A patch cannot rename or move an object.
		patched.SetName(live.GetName())
		patched.SetNamespace(live.GetNamespace())
		if err := checkKind(req.res, patched); err != nil {
			return nil, err
		}
		if attempt == 0 {
			if err := checkUnknownFields(w, r, req.res, patched); err != nil {
				return nil, err
			}
		}
		attempt++
		return h.finish(req, manager, live, patched)
	})
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out.Object)
}

func applyPatch(res *resource, patchType types.PatchType, live *unstructured.Unstructured, patch []byte) (*unstructured.Unstructured, error) {
	liveJSON, err := json.Marshal(live.Object)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("failed to encode the live object: %w", err))
	}
	var patched []byte
	switch patchType {
	case types.MergePatchType:
		if patched, err = jsonpatch.MergePatch(liveJSON, patch); err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("failed to apply the merge patch: %v", err))
		}
	case types.JSONPatchType:
		p, err := jsonpatch.DecodePatch(patch)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("failed to decode the JSON patch: %v", err))
		}
		if len(p) > maxJSONPatchOperations {
			return nil, apierrors.NewRequestEntityTooLargeError(
				fmt.Sprintf("The allowed maximum operations in a JSON patch is %d, got %d", maxJSONPatchOperations, len(p)))
		}
		if patched, err = applyJSONPatch(p, liveJSON); err != nil {
			return nil, unprocessable(fmt.Sprintf("failed to apply the JSON patch: %v", err))
		}
	case types.StrategicMergePatchType:
		if res.custom != nil {
			// As kube-apiserver: custom kinds have no patch strategy.
			return nil, unsupportedMediaType(string(patchType))
		}
		dataStruct, err := scheme.Scheme.New(res.gvk())
		if err != nil {
			return nil, apierrors.NewInternalError(fmt.Errorf("failed to make a %s: %w", res.kind, err))
		}
		if patched, err = strategicpatch.StrategicMergePatch(liveJSON, patch, dataStruct); err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("failed to apply the strategic merge patch: %v", err))
		}
	}
	return decodeJSONObject(patched)
}

// Bounds of a JSON patch, kube-apiserver's (maxJSONPatchOperations, and
// JSONPatchMaxCopyBytes, its default for the size "copy" operations may
// add). Each operation's value is in the request body, which is bounded;
// "copy" is the one operation that grows the object by more than the body:
// unbounded, a 60 KB patch of 1,000 copies of a 256 KiB value took 1.2 GiB
// of the process every workload cluster shares (issue 28).
const (
	maxJSONPatchOperations = 10000
	maxJSONPatchCopyBytes  = 3 * 1024 * 1024
)

// applyJSONPatch applies p within the copy bound. The library panics on
// some patches (json-patch v5.9.11: a "test" of the whole document, path
// "", without a value; found by FuzzHandler): such a patch is one that
// does not apply, not a server error.
func applyJSONPatch(p jsonpatch.Patch, doc []byte) (patched []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			patched, err = nil, fmt.Errorf("the patch cannot be applied: %v", r)
		}
	}()
	opts := jsonpatch.NewApplyOptions()
	opts.AccumulatedCopySizeLimit = maxJSONPatchCopyBytes
	return p.ApplyWithOptions(doc, opts)
}

func unprocessable(msg string) error {
	return apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "patch", schema.GroupResource{}, "", msg, 0, false)
}

// apply is server-side apply: the applied configuration merged into the
// live object (or a new one) by the field manager, conflicts with other
// managers a 409 unless forced.
func (h *Handler) apply(w http.ResponseWriter, r *http.Request, req *request, body []byte, wo []store.WriteOption) {
	q := r.URL.Query()
	manager := q.Get("fieldManager")
	if manager == "" {
		writeError(w, apierrors.NewBadRequest("PatchOptions.fieldManager is required for apply requests"))
		return
	}
	force := q.Get("force") == "true"
	js, err := yaml.YAMLToJSON(body)
	if err != nil {
		writeError(w, apierrors.NewBadRequest(fmt.Sprintf("failed to decode the applied configuration: %v", err)))
		return
	}
	applied, err := decodeJSONObject(js)
	if err != nil {
		writeError(w, err)
		return
	}
	if applied.GetAPIVersion() == "" || applied.GetKind() == "" {
		writeError(w, apierrors.NewBadRequest("apiVersion and kind must be set in an applied configuration"))
		return
	}
	if err := checkKind(req.res, applied); err != nil {
		writeError(w, err)
		return
	}
	if applied.GetName() == "" {
		applied.SetName(req.name)
	}
	if err := checkIdentity(req, applied); err != nil {
		writeError(w, err)
		return
	}
	fm, err := h.fieldManager(req.res, req.subresource)
	if err != nil {
		writeError(w, err)
		return
	}
	sr := req.res.storeResource()
	for attempt := 0; ; attempt++ {
		live, err := req.store.Get(sr, req.namespace, req.name)
		live = inVersion(req.res, live)
		creating := apierrors.IsNotFound(err)
		if err != nil && !creating {
			writeError(w, err)
			return
		}
		if creating && req.subresource != "" {
			writeError(w, err)
			return
		}
		var liveTyped runtime.Object
		if creating {
			liveTyped, _ = scheme.Scheme.New(req.res.gvk())
			empty := &unstructured.Unstructured{Object: map[string]any{}}
			empty.SetGroupVersionKind(req.res.gvk())
			empty.SetName(req.name)
			empty.SetNamespace(req.namespace)
			if liveTyped, err = typed(req.res, empty); err != nil {
				writeError(w, err)
				return
			}
		} else if liveTyped, err = typed(req.res, live); err != nil {
			writeError(w, err)
			return
		}
		merged, err := fm.Apply(liveTyped, applied, manager, force)
		if err != nil {
			// Conflicts come as Statuses (409). Anything else is the
			// applied configuration's fault (a field the kind's schema does
			// not declare: found by FuzzHandler), not a server error.
			var status apierrors.APIStatus
			if !errors.As(err, &status) {
				err = apierrors.NewBadRequest(fmt.Sprintf("failed to apply the configuration: %v", err))
			}
			writeError(w, err)
			return
		}
		next, err := toUnstructured(req.res, merged)
		if err != nil {
			writeError(w, err)
			return
		}
		if creating {
			defaultOnCreate(req.res, next)
			if next, err = h.admit(req, nil, next); err != nil {
				writeError(w, err)
				return
			}
			if next, err = toStorage(req.res, next); err != nil {
				writeError(w, err)
				return
			}
			created, err := req.store.Create(sr, next, wo...)
			if apierrors.IsAlreadyExists(err) && attempt < maxConflictRetries {
				continue
			}
			if err != nil {
				writeError(w, err)
				return
			}
			writeJSON(w, http.StatusCreated, inVersion(req.res, created).Object)
			return
		}
		managed := next.GetManagedFields()
		next = keepSubresourceFields(req, live, next)
		next.SetManagedFields(managed)
		if next, err = h.admit(req, live, next); err != nil {
			writeError(w, err)
			return
		}
		conditional := applied.GetResourceVersion() != ""
		if !conditional {
			next.SetResourceVersion(live.GetResourceVersion())
		}
		if next, err = toStorage(req.res, next); err != nil {
			writeError(w, err)
			return
		}
		out, err := req.store.Update(sr, next, wo...)
		if apierrors.IsConflict(err) && !conditional && attempt < maxConflictRetries {
			continue
		}
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, inVersion(req.res, out).Object)
		return
	}
}
