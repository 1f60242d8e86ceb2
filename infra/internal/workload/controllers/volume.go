package controllers

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
)

// Annotations of the persistent volume controller and admission.
const (
	defaultClassAnnotation  = "storageclass.kubernetes.io/is-default-class"
	bindCompletedAnnotation = "pv.kubernetes.io/bind-completed"
	boundByControllerAnn    = "pv.kubernetes.io/bound-by-controller"
	provisionedByAnnotation = "pv.kubernetes.io/provisioned-by"
	storageProvisionerAnn   = "volume.kubernetes.io/storage-provisioner"
	provisionedVolumeRoot   = "/var/lib/capi-monolith/volumes/"
)

// reconcileClaim binds a PersistentVolumeClaim as the persistent volume
// controller does: a claim without a class gets the default StorageClass
// (as the DefaultStorageClass admission plugin gives it); it binds to the
// smallest Available volume of its class, access modes and size, or, when
// none matches and its class exists, to a volume made for it as the class's
// provisioner would (pvc-<claim uid>, a hostPath, the class's reclaim
// policy). Binding is immediate whatever the class's volumeBindingMode.
func (c *Cluster) reconcileClaim(namespace, name string) error {
	u, err := c.store.Get(claims, namespace, name)
	if isGone(err) {
		return nil
	}
	if err != nil {
		return err
	}
	pvc, err := typed[corev1.PersistentVolumeClaim](u)
	if err != nil {
		return err
	}
	if pvc.Status.Phase == corev1.ClaimBound || pvc.DeletionTimestamp != nil {
		return nil
	}
	classes, _, err := c.store.List(storageClasses, "", store.ListOptions{})
	if err != nil {
		return err
	}
	var class *storagev1.StorageClass
	var defaultClass *storagev1.StorageClass
	for _, o := range classes {
		sc, err := typed[storagev1.StorageClass](o)
		if err != nil {
			return err
		}
		if pvc.Spec.StorageClassName != nil && *pvc.Spec.StorageClassName == sc.Name {
			class = sc
		}
		if sc.Annotations[defaultClassAnnotation] == "true" && (defaultClass == nil || sc.CreationTimestamp.After(defaultClass.CreationTimestamp.Time)) {
			defaultClass = sc
		}
	}
	if pvc.Spec.StorageClassName == nil && defaultClass != nil {
		out := u.DeepCopy()
		_ = unstructured.SetNestedField(out.Object, defaultClass.Name, "spec", "storageClassName")
		_, err := c.store.Update(claims, out)
		return err // the update brings the claim back here
	}
	className := ptr.Deref(pvc.Spec.StorageClassName, "")
	pvObjs, _, err := c.store.List(volumes, "", store.ListOptions{})
	if err != nil {
		return err
	}
	request := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	var best *corev1.PersistentVolume
	var bestObj *unstructured.Unstructured
	for _, o := range pvObjs {
		pv, err := typed[corev1.PersistentVolume](o)
		if err != nil {
			return err
		}
		if ref := pv.Spec.ClaimRef; ref != nil {
			if ref.Namespace == pvc.Namespace && ref.Name == pvc.Name && (ref.UID == "" || ref.UID == pvc.UID) {
				best, bestObj = pv, o // pre-bound to this claim
				break
			}
			continue
		}
		if pvc.Spec.VolumeName != "" && pv.Name != pvc.Spec.VolumeName {
			continue
		}
		if !volumeFits(pv, pvc, className, request) {
			continue
		}
		if best == nil || pv.Spec.Capacity.Storage().Cmp(*best.Spec.Capacity.Storage()) < 0 {
			best, bestObj = pv, o
		}
	}
	if best == nil {
		if class == nil || pvc.Spec.VolumeName != "" {
			if pvc.Status.Phase == "" {
				return c.setStatus(claims, u, corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending})
			}
			return nil // bound when a volume or its class appears
		}
		pv, err := c.provision(pvc, class, request)
		if err != nil {
			return err
		}
		best = pv
	} else if err := c.bindVolume(bestObj, pvc); err != nil {
		return err
	}
	out := u.DeepCopy()
	_ = unstructured.SetNestedField(out.Object, best.Name, "spec", "volumeName")
	ann := out.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[bindCompletedAnnotation] = "yes"
	ann[boundByControllerAnn] = "yes"
	if class != nil {
		ann[storageProvisionerAnn] = class.Provisioner
	}
	out.SetAnnotations(ann)
	st := corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, AccessModes: best.Spec.AccessModes, Capacity: best.Spec.Capacity}
	m, err := toUnstructured(&st)
	if err != nil {
		return err
	}
	out.Object["status"] = m.Object
	if _, err := c.store.Update(claims, out); err != nil {
		return fmt.Errorf("failed to bind claim %s/%s: %w", pvc.Namespace, pvc.Name, err)
	}
	return nil
}

func volumeFits(pv *corev1.PersistentVolume, pvc *corev1.PersistentVolumeClaim, class string, request resource.Quantity) bool {
	if pv.DeletionTimestamp != nil || (pv.Status.Phase != "" && pv.Status.Phase != corev1.VolumeAvailable) {
		return false
	}
	if pv.Spec.StorageClassName != class {
		return false
	}
	if ptr.Deref(pv.Spec.VolumeMode, corev1.PersistentVolumeFilesystem) != ptr.Deref(pvc.Spec.VolumeMode, corev1.PersistentVolumeFilesystem) {
		return false
	}
	for _, m := range pvc.Spec.AccessModes {
		if !slices.Contains(pv.Spec.AccessModes, m) {
			return false
		}
	}
	capacity := pv.Spec.Capacity[corev1.ResourceStorage]
	return capacity.Cmp(request) >= 0
}

func claimRef(pvc *corev1.PersistentVolumeClaim) *corev1.ObjectReference {
	return &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID, ResourceVersion: pvc.ResourceVersion}
}

func (c *Cluster) bindVolume(o *unstructured.Unstructured, pvc *corev1.PersistentVolumeClaim) error {
	out := o.DeepCopy()
	ref, err := toUnstructured(claimRef(pvc))
	if err != nil {
		return err
	}
	_ = unstructured.SetNestedMap(out.Object, ref.Object, "spec", "claimRef")
	ann := out.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[boundByControllerAnn] = "yes"
	out.SetAnnotations(ann)
	out.Object["status"] = map[string]any{"phase": string(corev1.VolumeBound)}
	if _, err := c.store.Update(volumes, out); err != nil {
		return fmt.Errorf("failed to bind PersistentVolume %s: %w", o.GetName(), err)
	}
	return nil
}

// provision makes the claim's volume as a dynamic provisioner would.
func (c *Cluster) provision(pvc *corev1.PersistentVolumeClaim, class *storagev1.StorageClass, request resource.Quantity) (*corev1.PersistentVolume, error) {
	name := "pvc-" + string(pvc.UID)
	if got, err := c.store.Get(volumes, "", name); err == nil {
		return typed[corev1.PersistentVolume](got)
	}
	modes := pvc.Spec.AccessModes
	if len(modes) == 0 {
		modes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	}
	pv := &corev1.PersistentVolume{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolume"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{provisionedByAnnotation: class.Provisioner},
			Finalizers:  nil,
		},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: request},
			AccessModes:                   modes,
			ClaimRef:                      claimRef(pvc),
			PersistentVolumeReclaimPolicy: ptr.Deref(class.ReclaimPolicy, corev1.PersistentVolumeReclaimDelete),
			StorageClassName:              class.Name,
			MountOptions:                  class.MountOptions,
			VolumeMode:                    pvc.Spec.VolumeMode,
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{
				Path: provisionedVolumeRoot + name, Type: ptr.To(corev1.HostPathDirectoryOrCreate),
			}},
		},
		Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeBound},
	}
	obj, err := toUnstructured(pv)
	if err != nil {
		return nil, err
	}
	if _, err := c.store.Create(volumes, obj); err != nil {
		return nil, fmt.Errorf("failed to provision PersistentVolume %s: %w", name, err)
	}
	return pv, nil
}

// reconcileAllClaims retries every claim not bound (a class or a volume appeared).
func (c *Cluster) reconcileAllClaims() error {
	objs, _, err := c.store.List(claims, "", store.ListOptions{})
	if err != nil {
		return err
	}
	for _, o := range objs {
		if phase, _, _ := unstructured.NestedString(o.Object, "status", "phase"); phase != string(corev1.ClaimBound) {
			c.enqueue(kindClaim, o.GetNamespace(), o.GetName())
		}
	}
	return nil
}

// reconcileReleasedVolume reclaims the volume of a deleted claim: deleted
// under the Delete policy, Released under Retain.
func (c *Cluster) reconcileReleasedVolume(name string) error {
	o, err := c.store.Get(volumes, "", name)
	if isGone(err) {
		return nil
	}
	if err != nil {
		return err
	}
	pv, err := typed[corev1.PersistentVolume](o)
	if err != nil {
		return err
	}
	ref := pv.Spec.ClaimRef
	if ref == nil {
		return nil
	}
	if claim, err := c.store.Get(claims, ref.Namespace, ref.Name); err == nil && (ref.UID == "" || claim.GetUID() == ref.UID) {
		return nil // still claimed
	} else if err != nil && !isGone(err) {
		return err
	}
	if pv.Spec.PersistentVolumeReclaimPolicy == corev1.PersistentVolumeReclaimDelete {
		return c.deleteObject(volumes, o)
	}
	return c.setStatus(volumes, o, corev1.PersistentVolumeStatus{Phase: corev1.VolumeReleased})
}
