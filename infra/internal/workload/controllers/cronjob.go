package controllers

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/robfig/cron/v3"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// maxMissed bounds how many missed schedule times are walked through to
// find the latest (the CronJob controller gives up at 100 too).
const maxMissed = 100

// reconcileCronJob makes a CronJob's Jobs on its schedule as the CronJob
// controller does: at each scheduled time (in spec.timeZone) a Job named
// <cronjob>-<minutes since the epoch> from jobTemplate, unless suspended,
// past startingDeadlineSeconds, or forbidden by concurrencyPolicy (Replace
// deletes the running ones); only the latest missed time runs. It keeps
// status.active, lastScheduleTime and lastSuccessfulTime, deletes finished
// Jobs beyond the history limits, and asks to be called again at the next
// scheduled time.
func (c *Cluster) reconcileCronJob(namespace, name string) (time.Duration, error) {
	u, err := c.store.Get(cronJobs, namespace, name)
	if isGone(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if u.GetDeletionTimestamp() != nil {
		return 0, nil
	}
	cj, err := typed[batchv1.CronJob](u)
	if err != nil {
		return 0, err
	}
	spec := cj.Spec.Schedule
	if tz := ptr.Deref(cj.Spec.TimeZone, ""); tz != "" {
		spec = "CRON_TZ=" + tz + " " + spec
	}
	sched, err := cron.ParseStandard(spec)
	if err != nil {
		// What the CronJob controller does too: nothing until it is fixed.
		c.m.opts.Log.V(2).Info("Unparseable CronJob schedule", "cluster", c.name, "cronjob", namespace+"/"+name, "schedule", spec, "reason", err.Error())
		return 0, nil
	}

	objs, err := c.owned(jobs, u, nil)
	if err != nil {
		return 0, err
	}
	st := cj.Status.DeepCopy()
	st.Active = nil
	var succeededJobs, failedJobs []*batchv1.Job
	var running []*batchv1.Job
	for _, o := range objs {
		j, err := typed[batchv1.Job](o)
		if err != nil {
			return 0, err
		}
		switch {
		case jobConditionTrue(j, batchv1.JobComplete):
			succeededJobs = append(succeededJobs, j)
			if j.Status.CompletionTime != nil && (st.LastSuccessfulTime == nil || st.LastSuccessfulTime.Before(j.Status.CompletionTime)) {
				st.LastSuccessfulTime = j.Status.CompletionTime
			}
		case jobConditionTrue(j, batchv1.JobFailed):
			failedJobs = append(failedJobs, j)
		case j.DeletionTimestamp == nil:
			running = append(running, j)
		}
	}
	for _, set := range []struct {
		jobs  []*batchv1.Job
		limit int32
	}{{succeededJobs, ptr.Deref(cj.Spec.SuccessfulJobsHistoryLimit, 3)}, {failedJobs, ptr.Deref(cj.Spec.FailedJobsHistoryLimit, 1)}} {
		slices.SortFunc(set.jobs, func(a, b *batchv1.Job) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) })
		for i := 0; i < len(set.jobs)-int(set.limit); i++ {
			if err := c.deleteJob(set.jobs[i]); err != nil {
				return 0, err
			}
		}
	}

	now := c.m.opts.Now()
	last := cj.CreationTimestamp.Time
	if st.LastScheduleTime != nil {
		last = st.LastScheduleTime.Time
	}
	var due time.Time
	for t, n := sched.Next(last), 0; !t.After(now) && !t.IsZero(); t, n = sched.Next(t), n+1 {
		due = t
		if n >= maxMissed {
			// Too many missed: start again from now.
			due = time.Time{}
			for t2 := sched.Next(now.Add(-24 * time.Hour)); !t2.After(now) && !t2.IsZero(); t2 = sched.Next(t2) {
				due = t2
			}
			break
		}
	}
	tooLate := cj.Spec.StartingDeadlineSeconds != nil && !due.IsZero() && now.Sub(due) > time.Duration(*cj.Spec.StartingDeadlineSeconds)*time.Second
	if !due.IsZero() && !ptr.Deref(cj.Spec.Suspend, false) && !tooLate {
		run := true
		switch cj.Spec.ConcurrencyPolicy {
		case batchv1.ForbidConcurrent:
			run = len(running) == 0
		case batchv1.ReplaceConcurrent:
			for _, j := range running {
				if err := c.deleteJob(j); err != nil {
					return 0, err
				}
			}
			running = nil
		}
		if run {
			j, err := c.createScheduledJob(cj, due)
			if err != nil {
				return 0, err
			}
			running = append(running, j)
			st.LastScheduleTime = &metav1.Time{Time: due}
		} else if cj.Spec.ConcurrencyPolicy == batchv1.ForbidConcurrent {
			// Tried again when the running Job finishes (its change queues this).
			due = time.Time{}
		}
	}
	for _, j := range running {
		st.Active = append(st.Active, corev1.ObjectReference{Kind: "Job", Namespace: j.Namespace, Name: j.Name, UID: j.UID, APIVersion: "batch/v1", ResourceVersion: j.ResourceVersion})
	}
	if err := c.setStatus(cronJobs, u, st); err != nil {
		return 0, err
	}
	next := sched.Next(now)
	if next.IsZero() {
		return 0, nil
	}
	// A little after, so that the time is due when looked at.
	return next.Sub(now) + 10*time.Millisecond, nil
}

func jobConditionTrue(j *batchv1.Job, t batchv1.JobConditionType) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func (c *Cluster) deleteJob(j *batchv1.Job) error {
	_, _, err := c.store.Delete(jobs, j.Namespace, j.Name, storePreconditions(j.UID))
	if err != nil && !isGone(err) {
		return fmt.Errorf("failed to delete Job %s/%s: %w", j.Namespace, j.Name, err)
	}
	return nil
}

// createScheduledJob makes the Job of a scheduled time; one made already
// (by an earlier attempt) is returned.
func (c *Cluster) createScheduledJob(cj *batchv1.CronJob, at time.Time) (*batchv1.Job, error) {
	name := fmt.Sprintf("%s-%d", cj.Name, at.Unix()/60)
	if got, err := c.store.Get(jobs, cj.Namespace, name); err == nil {
		return typed[batchv1.Job](got)
	}
	ann := maps.Clone(cj.Spec.JobTemplate.Annotations)
	if ann == nil {
		ann = map[string]string{}
	}
	ann[batchv1.CronJobScheduledTimestampAnnotation] = at.Format(time.RFC3339)
	j := &batchv1.Job{
		TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: cj.Namespace, Labels: maps.Clone(cj.Spec.JobTemplate.Labels), Annotations: ann,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "CronJob", Name: cj.Name, UID: cj.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
		},
		Spec: *cj.Spec.JobTemplate.Spec.DeepCopy(),
	}
	obj, err := toUnstructured(j)
	if err != nil {
		return nil, err
	}
	delete(obj.Object, "status")
	created, err := c.store.Create(jobs, obj)
	if err != nil {
		return nil, fmt.Errorf("failed to create Job %s/%s: %w", j.Namespace, j.Name, err)
	}
	return typed[batchv1.Job](created)
}
