package controllers

import (
	"sort"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
)

// reconcileReplicaSet keeps a ReplicaSet's (or ReplicationController's)
// number of Pods at spec.replicas and reports their counts; Pods ready
// for less than minReadySeconds are not available yet, and the
// ReplicaSet is looked at again when they are.
func (c *Cluster) reconcileReplicaSet(res store.Resource, namespace, name string) (time.Duration, error) {
	u, err := c.store.Get(res, namespace, name)
	if isGone(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	var (
		replicas   int32
		selector   labels.Selector
		template   *corev1.PodTemplateSpec
		minReady   int32
		generation = u.GetGeneration()
	)
	if res == replicationControllers {
		rc, err := typed[corev1.ReplicationController](u)
		if err != nil {
			return 0, err
		}
		replicas, minReady, template = ptr.Deref(rc.Spec.Replicas, 1), rc.Spec.MinReadySeconds, rc.Spec.Template
		sel := rc.Spec.Selector
		if len(sel) == 0 && template != nil {
			sel = template.Labels
		}
		selector = labels.SelectorFromSet(sel)
		if len(sel) == 0 {
			selector = labels.Nothing()
		}
	} else {
		rs, err := typed[appsv1.ReplicaSet](u)
		if err != nil {
			return 0, err
		}
		replicas, minReady, template = ptr.Deref(rs.Spec.Replicas, 1), rs.Spec.MinReadySeconds, &rs.Spec.Template
		selector = selectorOf(rs.Spec.Selector)
	}
	objs, err := c.owned(pods, u, selector)
	if err != nil {
		return 0, err
	}
	all, err := typedPods(objs)
	if err != nil {
		return 0, err
	}
	var active []*corev1.Pod
	for _, p := range all {
		if podActive(p) {
			active = append(active, p)
		}
	}
	if u.GetDeletionTimestamp() == nil && template != nil {
		switch diff := int(replicas) - len(active); {
		case diff > 0:
			for range diff {
				if err := c.createPod(newPod(template, namespace, u)); err != nil {
					return 0, err
				}
			}
		case diff < 0:
			// The least far along go first, as the ReplicaSet controller's ranking does.
			sort.SliceStable(active, func(i, j int) bool { return podRank(active[i]) < podRank(active[j]) })
			for _, p := range active[:-diff] {
				if err := c.deletePod(p); err != nil {
					return 0, err
				}
			}
			active = active[-diff:]
		}
	}

	now := c.m.opts.Now()
	var labelled, ready, available int32
	var after time.Duration
	for _, p := range active {
		if selector.Matches(labels.Set(p.Labels)) {
			labelled++
		}
		ok, since := podReady(p)
		if !ok {
			continue
		}
		ready++
		if wait := since.Add(time.Duration(minReady) * time.Second).Sub(now); wait > 0 {
			if after == 0 || wait < after {
				after = wait
			}
			continue
		}
		available++
	}
	if res == replicationControllers {
		st := corev1.ReplicationControllerStatus{
			Replicas: int32(len(active)), FullyLabeledReplicas: labelled, ReadyReplicas: ready, AvailableReplicas: available,
			ObservedGeneration: generation,
		}
		return after, c.setStatus(res, u, st)
	}
	st := appsv1.ReplicaSetStatus{
		Replicas: int32(len(active)), FullyLabeledReplicas: labelled, ReadyReplicas: ready, AvailableReplicas: available,
		ObservedGeneration: generation,
	}
	return after, c.setStatus(res, u, st)
}

// podRank orders Pods to delete: unscheduled, then pending, then not
// ready, then the newest.
func podRank(p *corev1.Pod) int64 {
	switch {
	case p.Spec.NodeName == "":
		return 0
	case p.Status.Phase != corev1.PodRunning:
		return 1
	}
	if ok, _ := podReady(p); !ok {
		return 2
	}
	return 3 + (1<<40 - p.CreationTimestamp.Unix())
}

var _ = metav1.Now
