package controllers

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
)

// reconcileJob runs a Job's Pods as the Job controller does: up to
// parallelism at once until completions of them succeeded (the kubelet
// here completes a Job's Pod as soon as it runs); then the Job gets the
// SuccessCriteriaMet and Complete conditions and its completionTime.
// Indexed Jobs get one Pod per completion index. A suspended Job makes no
// Pods. Simulated containers never fail, so backoffLimit never counts.
func (c *Cluster) reconcileJob(namespace, name string) error {
	u, j, err := liveObject[batchv1.Job](c, jobs, namespace, name)
	if u == nil || err != nil {
		return err
	}
	if jobFinished(j) {
		return nil
	}
	objs, err := c.owned(pods, u, labels.SelectorFromSet(labels.Set{batchv1.ControllerUidLabel: string(j.UID)}))
	if err != nil {
		return err
	}
	all, err := typedPods(objs)
	if err != nil {
		return err
	}
	var active, succeeded, failed, ready int32
	doneIndexes, activeIndexes := map[int]bool{}, map[int]bool{}
	for _, p := range all {
		idx, idxErr := strconv.Atoi(p.Annotations[batchv1.JobCompletionIndexAnnotation])
		switch {
		case p.Status.Phase == corev1.PodSucceeded:
			succeeded++
			if idxErr == nil {
				doneIndexes[idx] = true
			}
		case p.Status.Phase == corev1.PodFailed:
			failed++
		case p.DeletionTimestamp == nil:
			active++
			if idxErr == nil {
				activeIndexes[idx] = true
			}
			if ok, _ := podReady(p); ok {
				ready++
			}
		}
	}
	indexed := j.Spec.CompletionMode != nil && *j.Spec.CompletionMode == batchv1.IndexedCompletion
	if indexed {
		succeeded = int32(len(doneIndexes))
	}
	parallelism := ptr.Deref(j.Spec.Parallelism, 1)
	now := metav1.NewTime(c.m.opts.Now().Truncate(1e9))
	complete := false
	want := int32(0)
	if j.Spec.Completions != nil {
		complete = succeeded >= *j.Spec.Completions
		want = min(parallelism, *j.Spec.Completions-succeeded) - active
	} else {
		// A work queue: done when one succeeded and none runs.
		complete = succeeded > 0 && active == 0
		if succeeded == 0 {
			want = parallelism - active
		}
	}
	if !complete && !ptr.Deref(j.Spec.Suspend, false) {
		next := 0
		for range max(want, 0) {
			p := jobPod(u, j)
			if indexed {
				for doneIndexes[next] || activeIndexes[next] {
					next++
				}
				if next >= int(ptr.Deref(j.Spec.Completions, 1)) {
					break
				}
				activeIndexes[next] = true
				p.GenerateName = fmt.Sprintf("%s-%d-", j.Name, next)
				p.Annotations[batchv1.JobCompletionIndexAnnotation] = strconv.Itoa(next)
				p.Labels[batchv1.JobCompletionIndexAnnotation] = strconv.Itoa(next)
				p.Spec.Hostname = fmt.Sprintf("%s-%d", j.Name, next)
			}
			if err := c.createPod(p); err != nil {
				return err
			}
			active++
		}
	}
	st := j.Status.DeepCopy()
	if st.StartTime == nil && !ptr.Deref(j.Spec.Suspend, false) {
		st.StartTime = &now
	}
	st.Active, st.Succeeded, st.Failed, st.Ready = active, succeeded, failed, &ready
	st.Terminating = ptr.To[int32](0)
	st.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{}
	if indexed {
		st.CompletedIndexes = indexRanges(doneIndexes)
	}
	if complete {
		st.CompletionTime = &now
		st.Conditions = append(st.Conditions,
			batchv1.JobCondition{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonCompletionsReached, Message: "Reached expected number of succeeded pods", LastProbeTime: now, LastTransitionTime: now},
			batchv1.JobCondition{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonCompletionsReached, Message: "Reached expected number of succeeded pods", LastProbeTime: now, LastTransitionTime: now})
	}
	return c.setStatus(jobs, u, st)
}

func jobFinished(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// jobPod is a Pod of the Job, labelled as the Job controller labels them.
func jobPod(u interface{ GetName() string }, j *batchv1.Job) *corev1.Pod {
	tmpl := j.Spec.Template.DeepCopy()
	tmpl.Labels = maps.Clone(tmpl.Labels)
	if tmpl.Labels == nil {
		tmpl.Labels = map[string]string{}
	}
	tmpl.Annotations = maps.Clone(tmpl.Annotations)
	if tmpl.Annotations == nil {
		tmpl.Annotations = map[string]string{}
	}
	for k, v := range map[string]string{
		batchv1.ControllerUidLabel: string(j.UID), batchv1.JobNameLabel: j.Name,
		"controller-uid": string(j.UID), "job-name": j.Name,
	} {
		tmpl.Labels[k] = v
	}
	p := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: tmpl.ObjectMeta,
		Spec:       tmpl.Spec,
	}
	p.Namespace = j.Namespace
	p.GenerateName = j.Name + "-"
	p.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: "batch/v1", Kind: "Job", Name: j.Name, UID: j.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}}
	defaultPodSpec(&p.Spec)
	return p
}

// indexRanges writes completion indexes as the Job status does: "0-2,5".
func indexRanges(done map[int]bool) string {
	idx := make([]int, 0, len(done))
	for i := range done {
		idx = append(idx, i)
	}
	slices.Sort(idx)
	var parts []string
	for i := 0; i < len(idx); {
		j := i
		for j+1 < len(idx) && idx[j+1] == idx[j]+1 {
			j++
		}
		if i == j {
			parts = append(parts, strconv.Itoa(idx[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", idx[i], idx[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}
