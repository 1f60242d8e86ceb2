package apiserver

import (
	"fmt"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
)

// evict deletes the pod unless a PodDisruptionBudget forbids it, and
// answers as kube-apiserver does.
func (h *Handler) evict(w http.ResponseWriter, r *http.Request, req *request) {
	wo, body, err := decodeWrite(r)
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
