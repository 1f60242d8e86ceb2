package apiserver

import (
	"fmt"
	"mime"
	"net/http"
	"strings"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"
)

var scaleKind = autoscalingV1.WithKind("Scale")

// scalePath splits a CRD's scale path (".spec.replicas") into fields.
func scalePath(p string) []string { return strings.Split(strings.TrimPrefix(p, "."), ".") }

// specReplicasPath is where the Scale's spec.replicas is kept in the object:
// spec.replicas for the built-ins, the CRD's specReplicasPath for custom
// resources.
func specReplicasPath(res *resource) []string {
	if res.custom != nil {
		return scalePath(res.custom.scale.SpecReplicasPath)
	}
	return []string{"spec", "replicas"}
}

// scaleOf is the autoscaling/v1 Scale of an object. Of a Deployment,
// ReplicaSet, StatefulSet or ReplicationController: spec.replicas (1,
// kube-apiserver's default, when unset), status.replicas, and the selector
// as a string. Of a custom object: what the CRD's specReplicasPath,
// statusReplicasPath and labelSelectorPath hold.
func scaleOf(res *resource, obj *unstructured.Unstructured) (*autoscalingv1.Scale, error) {
	s := &autoscalingv1.Scale{
		TypeMeta: metav1.TypeMeta{APIVersion: scaleKind.GroupVersion().String(), Kind: scaleKind.Kind},
		ObjectMeta: metav1.ObjectMeta{
			Name: obj.GetName(), Namespace: obj.GetNamespace(), UID: obj.GetUID(),
			ResourceVersion: obj.GetResourceVersion(), CreationTimestamp: obj.GetCreationTimestamp(),
		},
	}
	if res.custom != nil {
		sc := res.custom.scale
		spec, _, _ := unstructured.NestedInt64(obj.Object, scalePath(sc.SpecReplicasPath)...)
		status, _, _ := unstructured.NestedInt64(obj.Object, scalePath(sc.StatusReplicasPath)...)
		s.Spec.Replicas, s.Status.Replicas = int32(spec), int32(status)
		if sc.LabelSelectorPath != nil {
			s.Status.Selector, _, _ = unstructured.NestedString(obj.Object, scalePath(*sc.LabelSelectorPath)...)
		}
		return s, nil
	}
	replicas, found, _ := unstructured.NestedInt64(obj.Object, "spec", "replicas")
	if !found {
		replicas = 1
	}
	s.Spec.Replicas = int32(replicas)
	statusReplicas, _, _ := unstructured.NestedInt64(obj.Object, "status", "replicas")
	s.Status.Replicas = int32(statusReplicas)
	if res.gv == coreV1 {
		set, _, _ := unstructured.NestedStringMap(obj.Object, "spec", "selector")
		s.Status.Selector = labels.SelectorFromSet(set).String()
		return s, nil
	}
	raw, found, _ := unstructured.NestedMap(obj.Object, "spec", "selector")
	if found {
		sel := &metav1.LabelSelector{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, sel); err != nil {
			return nil, apierrors.NewInternalError(fmt.Errorf("failed to decode the selector of %s %s: %w", res.kind, obj.GetName(), err))
		}
		ls, err := metav1.LabelSelectorAsSelector(sel)
		if err != nil {
			return nil, apierrors.NewInternalError(fmt.Errorf("the selector of %s %s is not valid: %w", res.kind, obj.GetName(), err))
		}
		s.Status.Selector = ls.String()
	}
	return s, nil
}

func writeScale(w http.ResponseWriter, res *resource, obj *unstructured.Unstructured) {
	s, err := scaleOf(res, obj)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, s)
}

// scale serves the scale subresource of built-in and custom resources:
// reads are the Scale of the object, writes (update, and patches of every
// kind applied to the Scale) set the object's replicas (specReplicasPath),
// as kube-apiserver's scale subresources do.
func (h *Handler) scale(w http.ResponseWriter, r *http.Request, req *request) {
	if r.Method == http.MethodGet {
		live, err := req.store.Get(req.res.storeResource(), req.namespace, req.name)
		if err != nil {
			writeError(w, err)
			return
		}
		writeScale(w, req.res, live)
		return
	}
	wo, err := dryRun(r.URL.Query()["dryRun"])
	if err != nil {
		writeError(w, err)
		return
	}
	// next makes the Scale the request asks for from the live one.
	var next func(live *autoscalingv1.Scale) (*autoscalingv1.Scale, error)
	if r.Method == http.MethodPut {
		body, err := decodeObject(r)
		if err != nil {
			writeError(w, err)
			return
		}
		if err := checkKindOf(scaleKind, body); err != nil {
			writeError(w, err)
			return
		}
		want := &autoscalingv1.Scale{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(body.Object, want); err != nil {
			writeError(w, apierrors.NewBadRequest(fmt.Sprintf("failed to decode the Scale: %v", err)))
			return
		}
		if want.Name != req.name {
			writeError(w, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", want.Name, req.name)))
			return
		}
		next = func(*autoscalingv1.Scale) (*autoscalingv1.Scale, error) { return want, nil }
	} else {
		ct := r.Header.Get("Content-Type")
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil {
			writeError(w, unsupportedMediaType(ct))
			return
		}
		body, err := readBody(r)
		if err != nil {
			writeError(w, err)
			return
		}
		next = func(live *autoscalingv1.Scale) (*autoscalingv1.Scale, error) {
			return patchScale(types.PatchType(mt), ct, live, body)
		}
	}
	manager := fieldManagerName(r)
	out, err := h.guaranteedUpdate(req, wo, func(live *unstructured.Unstructured) (*unstructured.Unstructured, error) {
		current, err := scaleOf(req.res, live)
		if err != nil {
			return nil, err
		}
		want, err := next(current)
		if err != nil {
			return nil, err
		}
		// Custom objects' replicas are checked with the rest of the object.
		if want.Spec.Replicas < 0 && req.res.custom == nil {
			return nil, apierrors.NewInvalid(scaleKind.GroupKind(), req.name, field.ErrorList{
				field.Invalid(field.NewPath("spec", "replicas"), want.Spec.Replicas, "must be greater than or equal to 0")})
		}
		obj := live.DeepCopy()
		if err := unstructured.SetNestedField(obj.Object, int64(want.Spec.Replicas), specReplicasPath(req.res)...); err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		// A resourceVersion in the Scale makes the write conditional.
		obj.SetResourceVersion(want.ResourceVersion)
		if req.res.custom != nil {
			// Validated as an update of the main resource (the CRD's
			// schema and rules hold); field ownership is not recorded.
			main := *req
			main.subresource = ""
			return h.admit(&main, live, obj)
		}
		return h.finish(req, manager, live, obj)
	})
	if err != nil {
		writeError(w, err)
		return
	}
	writeScale(w, req.res, out)
}

// patchScale applies a patch of any kind to a Scale. An applied
// configuration (server-side apply) sets what it names; field ownership of
// the replicas is not tracked through the Scale.
func patchScale(patchType types.PatchType, ct string, live *autoscalingv1.Scale, patch []byte) (*autoscalingv1.Scale, error) {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(live)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	liveObj := &unstructured.Unstructured{Object: u}
	scaleRes := &resource{gv: autoscalingV1, name: "scale", kind: scaleKind.Kind}
	var patched *unstructured.Unstructured
	switch patchType {
	case types.JSONPatchType, types.MergePatchType, types.StrategicMergePatchType:
		if patched, err = applyPatch(scaleRes, patchType, liveObj, patch); err != nil {
			return nil, err
		}
	case types.ApplyYAMLPatchType:
		js, err := yaml.YAMLToJSON(patch)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("failed to decode the applied configuration: %v", err))
		}
		if patched, err = applyPatch(scaleRes, types.MergePatchType, liveObj, js); err != nil {
			return nil, err
		}
	default:
		return nil, unsupportedMediaType(ct)
	}
	out := &autoscalingv1.Scale{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(patched.Object, out); err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("failed to decode the patched Scale: %v", err))
	}
	return out, nil
}
