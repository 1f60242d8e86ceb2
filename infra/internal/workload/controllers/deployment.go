package controllers

import (
	"fmt"
	"maps"
	"sort"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// Annotations and labels of the Deployment controller.
const (
	revisionAnnotation        = "deployment.kubernetes.io/revision"
	desiredReplicasAnnotation = "deployment.kubernetes.io/desired-replicas"
	maxReplicasAnnotation     = "deployment.kubernetes.io/max-replicas"
	podTemplateHashLabel      = appsv1.DefaultDeploymentUniqueLabelKey
)

// reconcileDeployment rolls a Deployment out as kube-controller-manager's
// Deployment controller does: one ReplicaSet per Pod template (named
// <deployment>-<pod-template-hash>, with the revision annotation), scaled
// by the strategy (RollingUpdate within maxSurge and maxUnavailable, or
// Recreate), and the status `kubectl rollout status`, `kubectl wait
// --for=condition=Available` and `helm install --wait` read. One step at
// a time: each ReplicaSet write brings the Deployment back here.
func (c *Cluster) reconcileDeployment(namespace, name string) error {
	u, d, err := liveObject[appsv1.Deployment](c, deployments, namespace, name)
	if u == nil || err != nil {
		return err
	}
	objs, err := c.owned(replicaSets, u, nil)
	if err != nil {
		return err
	}
	var newRS *appsv1.ReplicaSet
	var olds []*appsv1.ReplicaSet
	rsObj := map[string]*unstructured.Unstructured{}
	hash := templateHash(&d.Spec.Template, d.Status.CollisionCount)
	maxRev := int64(0)
	for _, o := range objs {
		rs, err := typed[appsv1.ReplicaSet](o)
		if err != nil {
			return err
		}
		rsObj[rs.Name] = o
		if rs.Labels[podTemplateHashLabel] == hash && newRS == nil {
			newRS = rs
			continue
		}
		olds = append(olds, rs)
		if r := revisionOf(rs); r > maxRev {
			maxRev = r
		}
	}
	// Oldest first: scaled down first.
	sort.Slice(olds, func(i, j int) bool { return revisionOf(olds[i]) < revisionOf(olds[j]) })
	replicas := ptr.Deref(d.Spec.Replicas, 1)
	surge, unavailable := rollingBounds(d, replicas)

	if !d.Spec.Paused {
		if newRS == nil {
			return c.createReplicaSet(u, d, hash, maxRev+1, replicas, surge, olds)
		}
		if revisionOf(newRS) <= maxRev {
			// Rolled back to an older template: it becomes the latest revision.
			o := rsObj[newRS.Name]
			ann := o.GetAnnotations()
			ann[revisionAnnotation] = strconv.FormatInt(maxRev+1, 10)
			o.SetAnnotations(ann)
			_, err := c.store.Update(replicaSets, o)
			return err
		}
		if done, err := c.scale(d, newRS, olds, rsObj, replicas, surge, unavailable); err != nil || done {
			return err
		}
		if err := c.cleanupReplicaSets(d, olds, rsObj); err != nil {
			return err
		}
	}
	return c.setStatus(deployments, u, deploymentStatus(d, newRS, olds, replicas, unavailable, c.m.opts.Now()))
}

func revisionOf(rs *appsv1.ReplicaSet) int64 {
	r, _ := strconv.ParseInt(rs.Annotations[revisionAnnotation], 10, 64)
	return r
}

// rollingBounds are the Deployment's maxSurge and maxUnavailable in Pods
// (surge rounded up, unavailable down; both 0 makes unavailable 1);
// Recreate has none.
func rollingBounds(d *appsv1.Deployment, replicas int32) (surge, unavailable int32) {
	if d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
		return 0, 0
	}
	def := intstr.FromString("25%")
	ms, mu := &def, &def
	if ru := d.Spec.Strategy.RollingUpdate; ru != nil {
		if ru.MaxSurge != nil {
			ms = ru.MaxSurge
		}
		if ru.MaxUnavailable != nil {
			mu = ru.MaxUnavailable
		}
	}
	s, _ := intstr.GetScaledValueFromIntOrPercent(ms, int(replicas), true)
	un, _ := intstr.GetScaledValueFromIntOrPercent(mu, int(replicas), false)
	if s == 0 && un == 0 {
		un = 1
	}
	if int32(un) > replicas {
		un = int(replicas)
	}
	return int32(s), int32(un)
}

func (c *Cluster) createReplicaSet(u *unstructured.Unstructured, d *appsv1.Deployment, hash string, revision int64, replicas, surge int32, olds []*appsv1.ReplicaSet) error {
	tmpl := d.Spec.Template.DeepCopy()
	tmpl.Labels = maps.Clone(tmpl.Labels)
	if tmpl.Labels == nil {
		tmpl.Labels = map[string]string{}
	}
	tmpl.Labels[podTemplateHashLabel] = hash
	sel := d.Spec.Selector.DeepCopy()
	if sel == nil {
		sel = &metav1.LabelSelector{}
	}
	sel.MatchLabels = maps.Clone(sel.MatchLabels)
	if sel.MatchLabels == nil {
		sel.MatchLabels = map[string]string{}
	}
	sel.MatchLabels[podTemplateHashLabel] = hash
	start := replicas
	var oldSpec int32
	for _, o := range olds {
		oldSpec += ptr.Deref(o.Spec.Replicas, 0) + o.Status.Replicas
	}
	if oldSpec > 0 {
		// The scaling steps bring it up as the strategy allows.
		start = 0
	}
	rs := &appsv1.ReplicaSet{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "ReplicaSet"},
		ObjectMeta: metav1.ObjectMeta{
			Name: d.Name + "-" + hash, Namespace: d.Namespace, Labels: tmpl.Labels,
			Annotations: map[string]string{
				revisionAnnotation:        strconv.FormatInt(revision, 10),
				desiredReplicasAnnotation: strconv.Itoa(int(replicas)),
				maxReplicasAnnotation:     strconv.Itoa(int(replicas + surge)),
			},
			OwnerReferences: []metav1.OwnerReference{controllerRef(u)},
		},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(start), MinReadySeconds: d.Spec.MinReadySeconds, Selector: sel, Template: *tmpl},
	}
	obj, err := toUnstructured(rs)
	if err != nil {
		return err
	}
	delete(obj.Object, "status")
	if _, err := c.store.Create(replicaSets, obj); err != nil {
		return fmt.Errorf("failed to create ReplicaSet %s/%s: %w", rs.Namespace, rs.Name, err)
	}
	return nil
}

// scale takes one step of the strategy; done says a ReplicaSet was written.
func (c *Cluster) scale(d *appsv1.Deployment, newRS *appsv1.ReplicaSet, olds []*appsv1.ReplicaSet, rsObj map[string]*unstructured.Unstructured, replicas, surge, unavailable int32) (bool, error) {
	set := func(rs *appsv1.ReplicaSet, n int32) (bool, error) {
		o := rsObj[rs.Name].DeepCopy()
		_ = unstructured.SetNestedField(o.Object, int64(n), "spec", "replicas")
		ann := o.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		if rs == newRS {
			ann[desiredReplicasAnnotation] = strconv.Itoa(int(replicas))
			ann[maxReplicasAnnotation] = strconv.Itoa(int(replicas + surge))
		}
		o.SetAnnotations(ann)
		if _, err := c.store.Update(replicaSets, o); err != nil {
			return false, fmt.Errorf("failed to scale ReplicaSet %s/%s: %w", rs.Namespace, rs.Name, err)
		}
		return true, nil
	}
	newSpec := ptr.Deref(newRS.Spec.Replicas, 0)
	var oldSpec, oldPods int32
	for _, o := range olds {
		oldSpec += ptr.Deref(o.Spec.Replicas, 0)
		oldPods += o.Status.Replicas
	}
	if newSpec > replicas {
		return set(newRS, replicas)
	}
	if d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
		for _, o := range olds {
			if ptr.Deref(o.Spec.Replicas, 0) > 0 {
				return set(o, 0)
			}
		}
		if oldPods > 0 {
			return false, nil // the old Pods are going: the new ones wait
		}
		if newSpec != replicas {
			return set(newRS, replicas)
		}
		return false, nil
	}
	if oldSpec == 0 {
		if newSpec != replicas {
			return set(newRS, replicas)
		}
		return false, nil
	}
	// Up: as far as maxSurge allows, counting the Pods an old ReplicaSet
	// still has beyond its spec (not deleted yet).
	all := newSpec + oldSpec
	pods := max(newSpec, newRS.Status.Replicas)
	for _, o := range olds {
		pods += max(ptr.Deref(o.Spec.Replicas, 0), o.Status.Replicas)
	}
	if max := replicas + surge; newSpec < replicas && pods < max {
		return set(newRS, min(newSpec+max-pods, replicas))
	}
	// Down: as far as maxUnavailable allows, unhealthy old Pods first. An
	// old ReplicaSet's available Pods count up to its spec: its status may
	// not have caught up with the last step yet.
	minAvailable := replicas - unavailable
	newUnavailable := newSpec - newRS.Status.AvailableReplicas
	maxScaledDown := all - minAvailable - newUnavailable
	if maxScaledDown <= 0 {
		return false, nil
	}
	oldAvailable := func(o *appsv1.ReplicaSet) int32 {
		return min(o.Status.AvailableReplicas, ptr.Deref(o.Spec.Replicas, 0))
	}
	for _, o := range olds {
		spec := ptr.Deref(o.Spec.Replicas, 0)
		if unhealthy := spec - oldAvailable(o); unhealthy > 0 {
			return set(o, spec-min(unhealthy, maxScaledDown))
		}
	}
	available := newRS.Status.AvailableReplicas
	for _, o := range olds {
		available += oldAvailable(o)
	}
	if down := min(available-minAvailable, maxScaledDown); down > 0 {
		for _, o := range olds {
			if spec := ptr.Deref(o.Spec.Replicas, 0); spec > 0 {
				return set(o, spec-min(spec, down))
			}
		}
	}
	return false, nil
}

// cleanupReplicaSets deletes the oldest scaled-down ReplicaSets beyond
// revisionHistoryLimit.
func (c *Cluster) cleanupReplicaSets(d *appsv1.Deployment, olds []*appsv1.ReplicaSet, rsObj map[string]*unstructured.Unstructured) error {
	limit := int(ptr.Deref(d.Spec.RevisionHistoryLimit, 10))
	var idle []*appsv1.ReplicaSet
	for _, o := range olds {
		if ptr.Deref(o.Spec.Replicas, 0) == 0 && o.Status.Replicas == 0 && o.DeletionTimestamp == nil {
			idle = append(idle, o)
		}
	}
	for i := 0; i < len(idle)-limit; i++ {
		if err := c.deleteObject(replicaSets, rsObj[idle[i].Name]); err != nil {
			return err
		}
	}
	return nil
}

func deploymentStatus(d *appsv1.Deployment, newRS *appsv1.ReplicaSet, olds []*appsv1.ReplicaSet, replicas, unavailable int32, now0 interface{ Unix() int64 }) appsv1.DeploymentStatus {
	st := appsv1.DeploymentStatus{ObservedGeneration: d.Generation, CollisionCount: d.Status.CollisionCount, Conditions: d.Status.Conditions}
	all := olds
	if newRS != nil {
		all = append([]*appsv1.ReplicaSet{newRS}, olds...)
		st.UpdatedReplicas = newRS.Status.Replicas
	}
	for _, rs := range all {
		st.Replicas += rs.Status.Replicas
		st.ReadyReplicas += rs.Status.ReadyReplicas
		st.AvailableReplicas += rs.Status.AvailableReplicas
	}
	if u := replicas - st.AvailableReplicas; u > 0 {
		st.UnavailableReplicas = u
	}
	now := metav1.Unix(now0.Unix(), 0)
	if st.AvailableReplicas >= replicas-unavailable {
		setDeploymentCondition(&st, appsv1.DeploymentAvailable, corev1.ConditionTrue, "MinimumReplicasAvailable", "Deployment has minimum availability.", now)
	} else {
		setDeploymentCondition(&st, appsv1.DeploymentAvailable, corev1.ConditionFalse, "MinimumReplicasUnavailable", "Deployment does not have minimum availability.", now)
	}
	switch {
	case d.Spec.Paused:
		setDeploymentCondition(&st, appsv1.DeploymentProgressing, corev1.ConditionUnknown, "DeploymentPaused", "Deployment is paused", now)
	case newRS == nil:
	case st.UpdatedReplicas == replicas && st.AvailableReplicas == replicas && st.Replicas == replicas:
		setDeploymentCondition(&st, appsv1.DeploymentProgressing, corev1.ConditionTrue, "NewReplicaSetAvailable",
			fmt.Sprintf("ReplicaSet %q has successfully progressed.", newRS.Name), now)
	default:
		setDeploymentCondition(&st, appsv1.DeploymentProgressing, corev1.ConditionTrue, "ReplicaSetUpdated",
			fmt.Sprintf("ReplicaSet %q is progressing.", newRS.Name), now)
	}
	return st
}

// setDeploymentCondition sets a condition; its times stay when nothing
// about it changes, so that a status computed again is the same status.
func setDeploymentCondition(st *appsv1.DeploymentStatus, t appsv1.DeploymentConditionType, status corev1.ConditionStatus, reason, msg string, now metav1.Time) {
	cond := appsv1.DeploymentCondition{Type: t, Status: status, Reason: reason, Message: msg, LastUpdateTime: now, LastTransitionTime: now}
	conds := append([]appsv1.DeploymentCondition(nil), st.Conditions...)
	for i, have := range conds {
		if have.Type != t {
			continue
		}
		if have.Status == status {
			cond.LastTransitionTime = have.LastTransitionTime
			if have.Reason == reason && have.Message == msg {
				cond.LastUpdateTime = have.LastUpdateTime
			}
		}
		conds[i] = cond
		st.Conditions = conds
		return
	}
	st.Conditions = append(conds, cond)
}
