package apiserver

//go:generate go run ./internal/genbuiltins -out zz_generated_builtins.go

import (
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// What the built-in resources do beyond storing objects. The table itself
// (names, kinds, verbs, scope, short names, categories, subresources) is
// zz_generated_builtins.go, read from kube-apiserver's discovery; every
// resource there is stored as it is by the generic code, except:
//
//   - the reviews, which kube-apiserver computes and never stores
//     (reviews.go): TokenReview, SelfSubjectReview, SelfSubjectAccessReview,
//     SelfSubjectRulesReview, SubjectAccessReview, LocalSubjectAccessReview;
//   - core bindings and pods/binding, which set a Pod's node;
//   - componentstatuses, computed;
//   - the subresources below (serveBuiltin).

// reviews are the resources answered by review.
var reviews = map[schema.GroupResource]bool{
	{Group: authnV1.Group, Resource: "tokenreviews"}:              true,
	{Group: authnV1.Group, Resource: "selfsubjectreviews"}:        true,
	{Group: authzV1.Group, Resource: "selfsubjectaccessreviews"}:  true,
	{Group: authzV1.Group, Resource: "selfsubjectrulesreviews"}:   true,
	{Group: authzV1.Group, Resource: "subjectaccessreviews"}:      true,
	{Group: authzV1.Group, Resource: "localsubjectaccessreviews"}: true,
}

// subresourceFields are the fields a subresource writes and the main
// resource does not: a write of the subresource changes only them, a
// write of the main resource keeps them as they are.
var subresourceFields = map[string][]string{
	"status":              {"status"},
	"finalize":            {"spec", "finalizers"},          // namespaces
	"approval":            {"status", "conditions"},        // certificatesigningrequests
	"ephemeralcontainers": {"spec", "ephemeralContainers"}, // pods
}

// serveBuiltin serves what a built-in resource does beyond storing
// objects (and the scale subresource of custom resources too), and says
// whether it did; verbs were checked by the caller.
func (h *Handler) serveBuiltin(w http.ResponseWriter, r *http.Request, req *request) bool {
	gr := schema.GroupResource{Group: req.res.gv.Group, Resource: req.res.name}
	switch req.subresource {
	case "":
		switch {
		case reviews[gr]:
			h.review(w, r, req)
		case gr == schema.GroupResource{Resource: "bindings"}:
			h.bind(w, r, req)
		case gr == schema.GroupResource{Resource: "componentstatuses"}:
			h.componentStatuses(w, r, req)
		default:
			return false
		}
	case "scale":
		h.scale(w, r, req)
	case "binding":
		h.bind(w, r, req)
	case "token":
		h.serviceAccountToken(w, r, req)
	case "log":
		h.podLog(w, r, req)
	case "eviction":
		h.evict(w, r, req)
	case "portforward":
		if h.opts.PortForward == nil {
			h.kubeletUnreachable(w, r, req)
			return true
		}
		h.portForward(w, r, req)
	case "exec", "attach", "proxy":
		h.kubeletUnreachable(w, r, req)
	default:
		// status, finalize, approval, ephemeralcontainers, resize: stored
		// writes of part of the object (keepSubresourceFields).
		return false
	}
	return true
}

// requestVerb is the verb of a resource request, as RBAC names it.
func requestVerb(r *http.Request, req *request) string {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		switch {
		case req.name != "" || req.subresource != "":
			return "get"
		case r.URL.Query().Get("watch") == "true" || r.URL.Query().Get("watch") == "1":
			return "watch"
		}
		return "list"
	case http.MethodPost:
		return "create"
	case http.MethodPut:
		return "update"
	case http.MethodPatch:
		return "patch"
	case http.MethodDelete:
		if req.name == "" {
			return "deletecollection"
		}
		return "delete"
	}
	return strings.ToLower(r.Method)
}

// checkVerb refuses a verb the resource or subresource does not have, as
// kube-apiserver's routes do: 405 where the path serves other verbs, 404
// where it serves none (an object path of a create-only resource).
func checkVerb(r *http.Request, req *request) error {
	verb := requestVerb(r, req)
	if req.subresource != "" {
		s := req.res.subresource(req.subresource)
		// Proxies take every method kube-apiserver's proxy routes take.
		if req.subresource == "proxy" || slices.Contains(s.verbs, verb) {
			return nil
		}
		return methodNotAllowed(r.Method, r.URL.Path)
	}
	verbs := req.res.allowedVerbs()
	if slices.Contains(verbs, verb) {
		return nil
	}
	shape := []string{"get", "update", "patch", "delete"}
	if req.name == "" {
		shape = []string{"list", "watch", "create", "deletecollection"}
	}
	for _, v := range shape {
		if slices.Contains(verbs, v) {
			return methodNotAllowed(r.Method, r.URL.Path)
		}
	}
	return notFoundPath(r.URL.Path)
}

// keepSubresourceFields makes next what a write of req may change of live:
// a write of a subresource in subresourceFields changes only its fields
// (resize only the containers' resources and resize policies), a write of
// the main resource none of them; other subresources (scale, binding)
// make next themselves.
func keepSubresourceFields(req *request, live, next *unstructured.Unstructured) *unstructured.Unstructured {
	if req.subresource == "" {
		for _, s := range req.res.subresourceList() {
			if path, ok := subresourceFields[s.name]; ok {
				copyNested(next, live, path)
			}
		}
		if req.res.subresource("resize") != nil {
			copyContainerResources(next, live)
		}
		return next
	}
	path, ok := subresourceFields[req.subresource]
	if !ok && req.subresource != "resize" {
		return next
	}
	merged := live.DeepCopy()
	if req.subresource == "resize" {
		copyContainerResources(merged, next)
	} else {
		copyNested(merged, next, path)
	}
	merged.SetResourceVersion(next.GetResourceVersion())
	return merged
}

// copyNested sets dst's field at path to src's (removing it when src has none).
func copyNested(dst, src *unstructured.Unstructured, path []string) {
	if v, ok, _ := unstructured.NestedFieldNoCopy(src.Object, path...); ok {
		_ = unstructured.SetNestedField(dst.Object, runtime.DeepCopyJSONValue(v), path...)
		return
	}
	unstructured.RemoveNestedField(dst.Object, path...)
}

// copyContainerResources copies the resources and resizePolicy of src's
// containers onto dst's containers of the same name: what pods/resize writes.
func copyContainerResources(dst, src *unstructured.Unstructured) {
	srcContainers, _, _ := unstructured.NestedSlice(src.Object, "spec", "containers")
	dstContainers, ok, _ := unstructured.NestedSlice(dst.Object, "spec", "containers")
	if !ok {
		return
	}
	for i, d := range dstContainers {
		dc, _ := d.(map[string]any)
		if dc == nil {
			continue
		}
		for _, s := range srcContainers {
			sc, _ := s.(map[string]any)
			if sc == nil || sc["name"] != dc["name"] {
				continue
			}
			for _, f := range []string{"resources", "resizePolicy"} {
				if v, ok := sc[f]; ok {
					dc[f] = runtime.DeepCopyJSONValue(v)
				} else {
					delete(dc, f)
				}
			}
		}
		dstContainers[i] = dc
	}
	_ = unstructured.SetNestedSlice(dst.Object, dstContainers, "spec", "containers")
}

// requestKind is the kind a request's body and answer carry: the
// subresource's (Scale, Binding, TokenRequest, Eviction) or the resource's.
func requestKind(req *request) schema.GroupVersionKind {
	if req.subresource != "" {
		if s := req.res.subresource(req.subresource); s != nil {
			return s.kind
		}
	}
	return req.res.gvk()
}

// checkKindOf is checkKind for a kind that is not a resource's own.
func checkKindOf(gvk schema.GroupVersionKind, obj *unstructured.Unstructured) error {
	if obj.GetAPIVersion() == "" {
		obj.SetAPIVersion(gvk.GroupVersion().String())
	}
	if obj.GetKind() == "" {
		obj.SetKind(gvk.Kind)
	}
	if obj.GroupVersionKind() != gvk {
		return apierrors.NewBadRequest(fmt.Sprintf("the object is a %s %s, the request is for %s %s",
			obj.GetAPIVersion(), obj.GetKind(), gvk.GroupVersion().String(), gvk.Kind))
	}
	return nil
}

var podsResource = lookup(coreV1, "pods")

// bind is core bindings and pods/binding: the Pod gets the target Node
// (only if it has none), the Binding's annotations, and the PodScheduled
// condition, as kube-apiserver's binding does; the answer is a Status.
func (h *Handler) bind(w http.ResponseWriter, r *http.Request, req *request) {
	wo, body, err := decodeWrite(r)
	if err != nil {
		writeError(w, err)
		return
	}
	if err := checkKindOf(coreV1.WithKind("Binding"), body); err != nil {
		writeError(w, err)
		return
	}
	b := &corev1.Binding{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(body.Object, b); err != nil {
		writeError(w, apierrors.NewBadRequest(fmt.Sprintf("failed to decode the Binding: %v", err)))
		return
	}
	name := b.Name
	if req.subresource == "binding" && name != req.name {
		writeError(w, apierrors.NewBadRequest("name in URL does not match name in Binding object"))
		return
	}
	var errs field.ErrorList
	if name == "" {
		errs = append(errs, field.Required(field.NewPath("metadata", "name"), ""))
	}
	if b.Target.Kind != "" && b.Target.Kind != "Node" {
		errs = append(errs, field.NotSupported(field.NewPath("target", "kind"), b.Target.Kind, []string{"Node", "<empty>"}))
	}
	if b.Target.Name == "" {
		errs = append(errs, field.Required(field.NewPath("target", "name"), ""))
	}
	if len(errs) > 0 {
		writeError(w, apierrors.NewInvalid(coreV1.WithKind("Binding").GroupKind(), name, errs))
		return
	}
	podReq := &request{res: podsResource, namespace: req.namespace, name: name, subresource: "binding", store: req.store}
	manager := fieldManagerName(r)
	_, err = h.guaranteedUpdate(podReq, wo, func(live *unstructured.Unstructured) (*unstructured.Unstructured, error) {
		pod := &corev1.Pod{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(live.Object, pod); err != nil {
			return nil, apierrors.NewInternalError(fmt.Errorf("failed to decode Pod %s: %w", name, err))
		}
		podGR := schema.GroupResource{Resource: "pods"}
		if pod.DeletionTimestamp != nil {
			return nil, apierrors.NewConflict(podGR, name, fmt.Errorf("pod %s is being deleted, cannot be assigned to a host", name))
		}
		if pod.Spec.NodeName != "" {
			return nil, apierrors.NewConflict(podGR, name, fmt.Errorf("pod %v is already assigned to node %q", name, pod.Spec.NodeName))
		}
		pod.Spec.NodeName = b.Target.Name
		for k, v := range b.Annotations {
			if pod.Annotations == nil {
				pod.Annotations = map[string]string{}
			}
			pod.Annotations[k] = v
		}
		scheduled := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}
		i := slices.IndexFunc(pod.Status.Conditions, func(c corev1.PodCondition) bool { return c.Type == corev1.PodScheduled })
		if i < 0 {
			pod.Status.Conditions = append(pod.Status.Conditions, scheduled)
		} else {
			pod.Status.Conditions[i] = scheduled
		}
		next, err := toUnstructured(podsResource, pod)
		if err != nil {
			return nil, err
		}
		return h.finish(podReq, manager, live, next)
	})
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, &metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusSuccess, Code: http.StatusCreated,
	})
}

// podContainer is the container a pods/log, exec or attach request names
// (the only one when it names none), with kube-apiserver's errors.
func podContainer(r *http.Request, pod *corev1.Pod) (string, error) {
	container := r.URL.Query().Get("container")
	var names []string
	for _, c := range pod.Spec.InitContainers {
		names = append(names, c.Name)
	}
	for _, c := range pod.Spec.Containers {
		names = append(names, c.Name)
	}
	for _, c := range pod.Spec.EphemeralContainers {
		names = append(names, c.Name)
	}
	if container == "" {
		switch len(pod.Spec.Containers) {
		case 1:
			return pod.Spec.Containers[0].Name, nil
		case 0:
			return "", apierrors.NewBadRequest(fmt.Sprintf("a container name must be specified for pod %s", pod.Name))
		}
		var regular []string
		for _, c := range pod.Spec.Containers {
			regular = append(regular, c.Name)
		}
		return "", apierrors.NewBadRequest(fmt.Sprintf("a container name must be specified for pod %s, choose one of: %v", pod.Name, regular))
	}
	if !slices.Contains(names, container) {
		return "", apierrors.NewBadRequest(fmt.Sprintf("container %s is not valid for pod %s", container, pod.Name))
	}
	return container, nil
}

func getPod(req *request) (*corev1.Pod, error) {
	u, err := req.store.Get(podsResource.storeResource(), req.namespace, req.name)
	if err != nil {
		return nil, err
	}
	pod := &corev1.Pod{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, pod); err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("failed to decode Pod %s: %w", req.name, err))
	}
	return pod, nil
}

// podLog is pods/log: empty, as kube-apiserver answers for a Pod with no
// node, and here for every Pod (no container runs to write a log).
func (h *Handler) podLog(w http.ResponseWriter, r *http.Request, req *request) {
	pod, err := getPod(req)
	if err != nil {
		writeError(w, err)
		return
	}
	container, err := podContainer(r, pod)
	if err != nil {
		writeError(w, err)
		return
	}
	if previous, _ := strconv.ParseBool(r.URL.Query().Get("previous")); previous && pod.Spec.NodeName != "" {
		writeError(w, apierrors.NewBadRequest(fmt.Sprintf("previous terminated container %q in pod %q not found", container, pod.Name)))
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(http.StatusOK)
}

var nodesResource = lookup(coreV1, "nodes")

// kubeletUnreachable answers what kube-apiserver answers for exec, attach,
// portforward and the proxies when the kubelet (or the service's
// endpoints) cannot be reached: there is none behind the workload API.
func (h *Handler) kubeletUnreachable(w http.ResponseWriter, r *http.Request, req *request) {
	nodeName := req.name
	switch req.res.name {
	case "services":
		if _, err := req.store.Get(req.res.storeResource(), req.namespace, req.name); err != nil {
			writeError(w, err)
			return
		}
		writeError(w, apierrors.NewServiceUnavailable(fmt.Sprintf("no endpoints available for service %q", req.name)))
		return
	case "pods":
		pod, err := getPod(req)
		if err != nil {
			writeError(w, err)
			return
		}
		if req.subresource == "exec" || req.subresource == "attach" {
			if _, err := podContainer(r, pod); err != nil {
				writeError(w, err)
				return
			}
		}
		if pod.Spec.NodeName == "" {
			writeError(w, apierrors.NewBadRequest(fmt.Sprintf("pod %s does not have a host assigned", pod.Name)))
			return
		}
		nodeName = pod.Spec.NodeName
	}
	u, err := req.store.Get(nodesResource.storeResource(), "", nodeName)
	if err != nil {
		writeError(w, err)
		return
	}
	node := &corev1.Node{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, node); err != nil {
		writeError(w, apierrors.NewInternalError(fmt.Errorf("failed to decode Node %s: %w", nodeName, err)))
		return
	}
	host := node.Name
	for _, t := range []corev1.NodeAddressType{corev1.NodeInternalIP, corev1.NodeExternalIP, corev1.NodeHostName} {
		if i := slices.IndexFunc(node.Status.Addresses, func(a corev1.NodeAddress) bool { return a.Type == t }); i >= 0 {
			host = node.Status.Addresses[i].Address
			break
		}
	}
	port := node.Status.DaemonEndpoints.KubeletEndpoint.Port
	if port == 0 {
		port = 10250
	}
	// kube-apiserver answers a dial error as any error that is not a
	// Status: 500 with no reason and the error as the message.
	writeError(w, &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusInternalServerError,
		Message: fmt.Sprintf("error dialing backend: dial tcp %s: connect: connection refused", net.JoinHostPort(host, strconv.Itoa(int(port)))),
	}})
}

// componentStatuses answers as a kube-apiserver whose scheduler,
// controller manager and etcd answer their health checks: the workload
// cluster's control plane is simulated and always healthy.
func (h *Handler) componentStatuses(w http.ResponseWriter, r *http.Request, req *request) {
	w.Header().Add("Warning", `299 - "v1 ComponentStatus is deprecated in v1.19+"`)
	var items []*unstructured.Unstructured
	for _, name := range []string{"controller-manager", "etcd-0", "scheduler"} {
		cs := &corev1.ComponentStatus{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ComponentStatus"},
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Conditions: []corev1.ComponentCondition{{Type: corev1.ComponentHealthy, Status: corev1.ConditionTrue, Message: "ok"}},
		}
		u, err := toUnstructured(req.res, cs)
		if err != nil {
			writeError(w, err)
			return
		}
		unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
		if req.name == "" || req.name == name {
			items = append(items, u)
		}
	}
	if req.name != "" {
		if len(items) == 0 {
			writeError(w, apierrors.NewNotFound(schema.GroupResource{Resource: "componentstatuses"}, req.name))
			return
		}
		if responseShape(r) == shapeTable {
			writeJSON(w, http.StatusOK, table(req.res, items, ""))
			return
		}
		writeJSON(w, http.StatusOK, items[0].Object)
		return
	}
	if responseShape(r) == shapeTable {
		writeJSON(w, http.StatusOK, table(req.res, items, ""))
		return
	}
	objs := make([]any, 0, len(items))
	for _, i := range items {
		objs = append(objs, i.Object)
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"apiVersion": "v1", "kind": "ComponentStatusList", "metadata": map[string]any{}, "items": objs,
	})
}
