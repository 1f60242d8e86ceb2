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
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
)

// serveScale answers a custom object's scale subresource as
// kube-apiserver does: an autoscaling/v1 Scale read from the CRD's
// specReplicasPath, statusReplicasPath and labelSelectorPath; an update or
// a patch of it (JSON merge, JSON patch or strategic merge, by the Scale
// type) sets specReplicasPath, the object then validated as any update.
func (h *Handler) serveScale(w http.ResponseWriter, r *http.Request, req *request) {
	switch r.Method {
	case http.MethodGet:
		live, err := req.store.Get(req.res.storeResource(), req.namespace, req.name)
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, scaleOf(req.res, live))
	case http.MethodPut:
		wo, body, err := decodeWrite(r)
		if err != nil {
			writeError(w, err)
			return
		}
		want := &autoscalingv1.Scale{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(body.Object, want); err != nil {
			writeError(w, apierrors.NewBadRequest(fmt.Sprintf("failed to decode the Scale: %v", err)))
			return
		}
		h.updateScale(w, req, wo, func(*autoscalingv1.Scale) (*autoscalingv1.Scale, error) { return want, nil })
	case http.MethodPatch:
		h.patchScale(w, r, req)
	default:
		writeError(w, methodNotAllowed(r.Method, r.URL.Path))
	}
}

func (h *Handler) patchScale(w http.ResponseWriter, r *http.Request, req *request) {
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
	case types.JSONPatchType, types.MergePatchType, types.StrategicMergePatchType:
	default:
		writeError(w, unsupportedMediaType(ct))
		return
	}
	patch, err := readBody(r)
	if err != nil {
		writeError(w, err)
		return
	}
	scaleRes := &resource{gv: autoscalingv1.SchemeGroupVersion, name: "scale", kind: "Scale"}
	h.updateScale(w, req, wo, func(cur *autoscalingv1.Scale) (*autoscalingv1.Scale, error) {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(cur)
		if err != nil {
			return nil, apierrors.NewInternalError(fmt.Errorf("failed to encode the Scale: %w", err))
		}
		patched, err := applyPatch(scaleRes, patchType, &unstructured.Unstructured{Object: m}, patch)
		if err != nil {
			return nil, err
		}
		out := &autoscalingv1.Scale{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(patched.Object, out); err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("failed to decode the patched Scale: %v", err))
		}
		return out, nil
	})
}

// updateScale reads the object, derives the Scale wanted from its current
// one and stores the object with the wanted replicas; a conflict the
// request did not ask for (no resourceVersion in the Scale) is retried.
func (h *Handler) updateScale(w http.ResponseWriter, req *request, wo []store.WriteOption, mutate func(*autoscalingv1.Scale) (*autoscalingv1.Scale, error)) {
	sc := req.res.custom.scale
	replicasPath := strings.Split(strings.TrimPrefix(sc.SpecReplicasPath, "."), ".")
	for attempt := 0; ; attempt++ {
		live, err := req.store.Get(req.res.storeResource(), req.namespace, req.name)
		if err != nil {
			writeError(w, err)
			return
		}
		live = inVersion(req.res, live)
		cur := scaleOf(req.res, live)
		want, err := mutate(cur.DeepCopy())
		if err != nil {
			writeError(w, err)
			return
		}
		if want.Name != "" && want.Name != req.name {
			writeError(w, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", want.Name, req.name)))
			return
		}
		conditional := want.ResourceVersion != "" && want.ResourceVersion != live.GetResourceVersion()
		if conditional {
			writeError(w, conflict(req, live.GetName()))
			return
		}
		next := live.DeepCopy()
		if err := unstructured.SetNestedField(next.Object, int64(want.Spec.Replicas), replicasPath...); err != nil {
			writeError(w, apierrors.NewInternalError(fmt.Errorf("failed to set %s: %w", sc.SpecReplicasPath, err)))
			return
		}
		mainReq := *req
		mainReq.subresource = ""
		if next, err = h.admit(&mainReq, live, next); err != nil {
			writeError(w, err)
			return
		}
		out, err := req.store.Update(req.res.storeResource(), next, wo...)
		if apierrors.IsConflict(err) && want.ResourceVersion == "" && attempt < maxConflictRetries {
			continue
		}
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, scaleOf(req.res, out))
		return
	}
}

func conflict(req *request, name string) error {
	return apierrors.NewConflict(req.res.storeResource().GroupResource(), name,
		fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again"))
}

// scaleOf is the Scale of a custom object.
func scaleOf(res *resource, obj *unstructured.Unstructured) *autoscalingv1.Scale {
	sc := res.custom.scale
	path := func(p string) []string { return strings.Split(strings.TrimPrefix(p, "."), ".") }
	spec, _, _ := unstructured.NestedInt64(obj.Object, path(sc.SpecReplicasPath)...)
	status, _, _ := unstructured.NestedInt64(obj.Object, path(sc.StatusReplicasPath)...)
	out := &autoscalingv1.Scale{
		TypeMeta: metav1.TypeMeta{Kind: "Scale", APIVersion: autoscalingv1.SchemeGroupVersion.String()},
		ObjectMeta: metav1.ObjectMeta{
			Name: obj.GetName(), Namespace: obj.GetNamespace(), UID: obj.GetUID(),
			ResourceVersion: obj.GetResourceVersion(), CreationTimestamp: obj.GetCreationTimestamp(),
		},
		Spec:   autoscalingv1.ScaleSpec{Replicas: int32(spec)},
		Status: autoscalingv1.ScaleStatus{Replicas: int32(status)},
	}
	if sc.LabelSelectorPath != nil {
		out.Status.Selector, _, _ = unstructured.NestedString(obj.Object, path(*sc.LabelSelectorPath)...)
	}
	return out
}
