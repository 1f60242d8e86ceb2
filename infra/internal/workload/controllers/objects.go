package controllers

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"reflect"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
)

// The resources the controllers read and write.
var (
	pods                   = store.Resource{Resource: "pods", Namespaced: true}
	nodes                  = store.Resource{Resource: "nodes"}
	services               = store.Resource{Resource: "services", Namespaced: true}
	endpoints              = store.Resource{Resource: "endpoints", Namespaced: true}
	claims                 = store.Resource{Resource: "persistentvolumeclaims", Namespaced: true}
	volumes                = store.Resource{Resource: "persistentvolumes"}
	configMaps             = store.Resource{Resource: "configmaps", Namespaced: true}
	replicationControllers = store.Resource{Resource: "replicationcontrollers", Namespaced: true}
	endpointSlices         = store.Resource{Group: "discovery.k8s.io", Resource: "endpointslices", Namespaced: true}
	replicaSets            = store.Resource{Group: "apps", Resource: "replicasets", Namespaced: true}
	deployments            = store.Resource{Group: "apps", Resource: "deployments", Namespaced: true}
	statefulSets           = store.Resource{Group: "apps", Resource: "statefulsets", Namespaced: true}
	daemonSets             = store.Resource{Group: "apps", Resource: "daemonsets", Namespaced: true}
	jobs                   = store.Resource{Group: "batch", Resource: "jobs", Namespaced: true}
	cronJobs               = store.Resource{Group: "batch", Resource: "cronjobs", Namespaced: true}
	storageClasses         = store.Resource{Group: "storage.k8s.io", Resource: "storageclasses"}
)

// liveObject reads an object to reconcile and its typed form; nil, with
// no error, when it is gone or being deleted (nothing to do then).
func liveObject[T any](c *Cluster, res store.Resource, namespace, name string) (*unstructured.Unstructured, *T, error) {
	u, err := c.store.Get(res, namespace, name)
	if isGone(err) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	if u.GetDeletionTimestamp() != nil {
		return nil, nil, nil
	}
	t, err := typed[T](u)
	if err != nil {
		return nil, nil, err
	}
	return u, t, nil
}

// typed converts a stored object to its Go type, to read it.
func typed[T any](u *unstructured.Unstructured) (*T, error) {
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
		return nil, fmt.Errorf("failed to read %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
	return out, nil
}

// toUnstructured converts a new object to what the store holds.
func toUnstructured(obj any) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("failed to convert %T: %w", obj, err)
	}
	return &unstructured.Unstructured{Object: m}, nil
}

// setStatus replaces the stored object's status with st's and writes it
// (nothing is written when it is unchanged: the store ignores no-op updates).
// Only status is set on the object as stored, so that the round trip
// through Go types never changes its spec (and generation).
func (c *Cluster) setStatus(res store.Resource, u *unstructured.Unstructured, st any) error {
	if v := reflect.ValueOf(st); v.Kind() != reflect.Pointer {
		p := reflect.New(v.Type())
		p.Elem().Set(v)
		st = p.Interface()
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(st)
	if err != nil {
		return fmt.Errorf("failed to convert the status: %w", err)
	}
	u = u.DeepCopy()
	u.Object["status"] = m
	if _, err := c.store.Update(res, u); err != nil {
		return fmt.Errorf("failed to update the status of %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	return nil
}

// controllerRef is the ownerReference a controller puts on what it makes;
// the garbage collector deletes those with their owner.
func controllerRef(owner *unstructured.Unstructured) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion: owner.GetAPIVersion(), Kind: owner.GetKind(), Name: owner.GetName(), UID: owner.GetUID(),
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}
}

// ownedBy says whether obj's controller is the object of uid.
func ownedBy(obj metav1.Object, uid types.UID) bool {
	ref := metav1.GetControllerOfNoCopy(obj)
	return ref != nil && ref.UID == uid
}

// owned lists res's objects in namespace whose controller is owner.
func (c *Cluster) owned(res store.Resource, owner *unstructured.Unstructured, sel labels.Selector) ([]*unstructured.Unstructured, error) {
	all, _, err := c.store.List(res, owner.GetNamespace(), store.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("failed to list %s: %w", res.Resource, err)
	}
	out := all[:0]
	for _, o := range all {
		if ownedBy(o, owner.GetUID()) {
			out = append(out, o)
		}
	}
	return out, nil
}

// selectorOf is a workload's label selector; nil selects nothing.
func selectorOf(s *metav1.LabelSelector) labels.Selector {
	if s == nil {
		return labels.Nothing()
	}
	sel, err := metav1.LabelSelectorAsSelector(s)
	if err != nil {
		return labels.Nothing()
	}
	return sel
}

// templateHash is the hash of a Pod template, as the pod-template-hash and
// controller-revision-hash labels carry it.
func templateHash(tmpl *corev1.PodTemplateSpec, collisions *int32) string {
	h := fnv.New32a()
	raw, _ := json.Marshal(tmpl)
	_, _ = h.Write(raw)
	if collisions != nil {
		_, _ = h.Write([]byte(strconv.Itoa(int(*collisions))))
	}
	return utilrand.SafeEncodeString(fmt.Sprint(h.Sum32()))
}

// newPod makes the Pod of a template, with the defaults kube-apiserver
// would give a Pod created through the API.
func newPod(tmpl *corev1.PodTemplateSpec, namespace string, owner *unstructured.Unstructured) *corev1.Pod {
	p := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: *tmpl.ObjectMeta.DeepCopy(),
		Spec:       *tmpl.Spec.DeepCopy(),
	}
	p.Namespace = namespace
	p.Name = ""
	p.GenerateName = owner.GetName() + "-"
	p.OwnerReferences = []metav1.OwnerReference{controllerRef(owner)}
	defaultPodSpec(&p.Spec)
	return p
}

// defaultPodSpec sets what kube-apiserver's defaulting sets on a Pod spec
// and the kubelet reads.
func defaultPodSpec(s *corev1.PodSpec) {
	if s.RestartPolicy == "" {
		s.RestartPolicy = corev1.RestartPolicyAlways
	}
	if s.DNSPolicy == "" {
		s.DNSPolicy = corev1.DNSClusterFirst
	}
	if s.SchedulerName == "" {
		s.SchedulerName = corev1.DefaultSchedulerName
	}
	if s.TerminationGracePeriodSeconds == nil {
		s.TerminationGracePeriodSeconds = ptr.To[int64](corev1.DefaultTerminationGracePeriodSeconds)
	}
	if s.ServiceAccountName == "" {
		s.ServiceAccountName = "default"
	}
	if s.SecurityContext == nil {
		s.SecurityContext = &corev1.PodSecurityContext{}
	}
	for i := range s.Containers {
		defaultContainer(&s.Containers[i])
	}
	for i := range s.InitContainers {
		defaultContainer(&s.InitContainers[i])
	}
}

func defaultContainer(c *corev1.Container) {
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = corev1.TerminationMessagePathDefault
	}
	if c.TerminationMessagePolicy == "" {
		c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
	}
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = corev1.PullIfNotPresent
		if tagOf(c.Image) == "latest" {
			c.ImagePullPolicy = corev1.PullAlways
		}
	}
}

// tagOf is an image reference's tag, "latest" when it names none.
func tagOf(image string) string {
	for i := len(image) - 1; i >= 0; i-- {
		switch image[i] {
		case '@':
			return ""
		case ':':
			return image[i+1:]
		case '/':
			return "latest"
		}
	}
	return "latest"
}

// podReady says whether the Pod's Ready condition is True, and since when.
func podReady(p *corev1.Pod) (bool, metav1.Time) {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue, c.LastTransitionTime
		}
	}
	return false, metav1.Time{}
}

// podActive says whether the Pod counts for its controller: not being
// deleted and not finished.
func podActive(p *corev1.Pod) bool {
	return p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

// typedPods converts stored Pods.
func typedPods(objs []*unstructured.Unstructured) ([]*corev1.Pod, error) {
	out := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		p, err := typed[corev1.Pod](o)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// deletePod deletes a Pod; one already gone is no error.
func (c *Cluster) deletePod(p *corev1.Pod) error {
	_, _, err := c.store.Delete(pods, p.Namespace, p.Name, store.Preconditions{UID: p.UID})
	if err != nil && !isGone(err) {
		return fmt.Errorf("failed to delete Pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	return nil
}

func (c *Cluster) createPod(p *corev1.Pod) error {
	u, err := toUnstructured(p)
	if err != nil {
		return err
	}
	delete(u.Object, "status")
	if _, err := c.store.Create(pods, u); err != nil {
		return fmt.Errorf("failed to create a Pod: %w", err)
	}
	return nil
}

// deleteObject deletes a stored object (that very one: its uid is a
// precondition); one already gone is no error.
func (c *Cluster) deleteObject(res store.Resource, o *unstructured.Unstructured) error {
	_, _, err := c.store.Delete(res, o.GetNamespace(), o.GetName(), store.Preconditions{UID: o.GetUID()})
	if err != nil && !isGone(err) {
		return fmt.Errorf("failed to delete %s %s/%s: %w", res.Resource, o.GetNamespace(), o.GetName(), err)
	}
	return nil
}

func storePreconditions(uid types.UID) store.Preconditions { return store.Preconditions{UID: uid} }
