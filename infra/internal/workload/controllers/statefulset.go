package controllers

import (
	"fmt"
	"maps"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
)

// Labels the StatefulSet controller puts on its Pods.
const (
	revisionHashLabel = appsv1.ControllerRevisionHashLabelKey
	stsPodNameLabel   = appsv1.StatefulSetPodNameLabel
	podIndexLabel     = appsv1.PodIndexLabel
)

// reconcileStatefulSet keeps Pods <name>-<ordinal> as the StatefulSet
// controller does: OrderedReady makes them one at a time, each once the one
// before is Running and Ready, and removes them highest first; Parallel
// does all at once. A RollingUpdate replaces, highest ordinal first and
// one at a time, the Pods at or above the partition whose revision is not
// the update revision. Claims of volumeClaimTemplates are made per Pod
// (<template>-<name>-<ordinal>) and kept. The revision is
// <name>-<template hash>; no ControllerRevision objects are kept.
func (c *Cluster) reconcileStatefulSet(namespace, name string) error {
	u, s, err := liveObject[appsv1.StatefulSet](c, statefulSets, namespace, name)
	if u == nil || err != nil {
		return err
	}
	replicas := ptr.Deref(s.Spec.Replicas, 1)
	start := int32(0)
	if s.Spec.Ordinals != nil {
		start = s.Spec.Ordinals.Start
	}
	updateRev := s.Name + "-" + templateHash(&s.Spec.Template, s.Status.CollisionCount)
	currentRev := s.Status.CurrentRevision
	if currentRev == "" {
		currentRev = updateRev
	}
	objs, err := c.owned(pods, u, selectorOf(s.Spec.Selector))
	if err != nil {
		return err
	}
	all, err := typedPods(objs)
	if err != nil {
		return err
	}
	byOrdinal := map[int32]*corev1.Pod{}
	for _, p := range all {
		if i, err := strconv.ParseInt(strings.TrimPrefix(p.Name, s.Name+"-"), 10, 32); err == nil && strings.HasPrefix(p.Name, s.Name+"-") {
			byOrdinal[int32(i)] = p
		}
	}
	parallel := s.Spec.PodManagementPolicy == appsv1.ParallelPodManagement
	running := func(p *corev1.Pod) bool {
		ok, _ := podReady(p)
		return p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && ok
	}
	st := appsv1.StatefulSetStatus{ObservedGeneration: s.Generation, CollisionCount: s.Status.CollisionCount, UpdateRevision: updateRev, CurrentRevision: currentRev}
	report := func() error {
		for _, p := range byOrdinal {
			if !podActive(p) {
				continue
			}
			st.Replicas++
			if running(p) {
				st.ReadyReplicas++
				st.AvailableReplicas++
			}
			switch p.Labels[revisionHashLabel] {
			case updateRev:
				st.UpdatedReplicas++
				if currentRev == updateRev {
					st.CurrentReplicas++
				}
			case currentRev:
				st.CurrentReplicas++
			}
		}
		if st.UpdatedReplicas == replicas && st.ReadyReplicas == replicas && st.Replicas == replicas {
			// The rollout is complete: the update revision is the current one.
			st.CurrentRevision, st.CurrentReplicas = updateRev, st.UpdatedReplicas
		}
		return c.setStatus(statefulSets, u, st)
	}

	// Up, in order.
	for i := start; i < start+replicas; i++ {
		p := byOrdinal[i]
		if p == nil {
			np, err := c.statefulPod(u, s, i, updateRev)
			if err != nil {
				return err
			}
			if err := c.createPod(np); err != nil {
				return err
			}
			if !parallel {
				return report()
			}
			continue
		}
		if !podActive(p) {
			// A finished or deleted Pod is made again once gone.
			if p.DeletionTimestamp == nil {
				if err := c.deletePod(p); err != nil {
					return err
				}
			}
			if !parallel {
				return report()
			}
			continue
		}
		if !parallel && !running(p) {
			return report()
		}
	}
	// Down, highest first.
	for i := int32(len(all)) + start + replicas; i >= start+replicas; i-- {
		if p := byOrdinal[i]; p != nil && p.DeletionTimestamp == nil {
			if err := c.deletePod(p); err != nil {
				return err
			}
			if !parallel {
				return report()
			}
		}
	}
	// Update, highest first, once every Pod is ready.
	if s.Spec.UpdateStrategy.Type != appsv1.OnDeleteStatefulSetStrategyType {
		partition := int32(0)
		if ru := s.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.Partition != nil {
			partition = *ru.Partition
		}
		allReady := true
		for i := start; i < start+replicas; i++ {
			if p := byOrdinal[i]; p == nil || !running(p) {
				allReady = false
			}
		}
		if allReady {
			for i := start + replicas - 1; i >= start+partition; i-- {
				if p := byOrdinal[i]; p.Labels[revisionHashLabel] != updateRev {
					if err := c.deletePod(p); err != nil {
						return err
					}
					break
				}
			}
		}
	}
	return report()
}

// statefulPod is the Pod of an ordinal, with its claims made first.
func (c *Cluster) statefulPod(u *unstructured.Unstructured, s *appsv1.StatefulSet, i int32, rev string) (*corev1.Pod, error) {
	p := newPod(&s.Spec.Template, s.Namespace, u)
	p.GenerateName = ""
	p.Name = fmt.Sprintf("%s-%d", s.Name, i)
	p.Labels = maps.Clone(p.Labels)
	if p.Labels == nil {
		p.Labels = map[string]string{}
	}
	p.Labels[revisionHashLabel] = rev
	p.Labels[stsPodNameLabel] = p.Name
	p.Labels[podIndexLabel] = strconv.Itoa(int(i))
	p.Spec.Hostname = p.Name
	p.Spec.Subdomain = s.Spec.ServiceName
	for _, t := range s.Spec.VolumeClaimTemplates {
		claim := fmt.Sprintf("%s-%s", t.Name, p.Name)
		pvc := &corev1.PersistentVolumeClaim{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
			ObjectMeta: metav1.ObjectMeta{Name: claim, Namespace: s.Namespace, Labels: maps.Clone(s.Spec.Selector.MatchLabels), Annotations: t.Annotations},
			Spec:       *t.Spec.DeepCopy(),
		}
		if _, err := c.store.Get(claims, s.Namespace, claim); isGone(err) {
			obj, err := toUnstructured(pvc)
			if err != nil {
				return nil, err
			}
			delete(obj.Object, "status")
			if _, err := c.store.Create(claims, obj); err != nil {
				return nil, fmt.Errorf("failed to create claim %s/%s: %w", s.Namespace, claim, err)
			}
		} else if err != nil {
			return nil, err
		}
		replaced := false
		for k := range p.Spec.Volumes {
			if p.Spec.Volumes[k].Name == t.Name {
				p.Spec.Volumes[k].VolumeSource = corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}
				replaced = true
			}
		}
		if !replaced {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: t.Name,
				VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}})
		}
	}
	return p, nil
}
