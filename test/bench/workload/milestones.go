package main

import (
	"fmt"
	"slices"
	"time"

	"k8s.io/utils/ptr"

	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/capi-monolith/capi-monolith/test/bench/harness/report"
)

// Milestone is a step every Machine (or control plane) passes on its way
// up; the milestones say in which step one side's machines wait longer than
// the other's.
type Milestone string

// The steps, in the order a Machine passes them.
const (
	Created                   Milestone = "created"
	BootstrapDataCreated      Milestone = "bootstrap data created"
	InfrastructureProvisioned Milestone = "infrastructure provisioned"
	NodeRefSet                Milestone = "nodeRef set"
	MachineRunning            Milestone = "Running"
	ControlPlaneInitialized   Milestone = "initialized"
	ControlPlaneAvailable     Milestone = "Available"
)

// ClusterMilestones are the steps of a Cluster, in order: KCP makes its
// first Machine only once the infrastructure is provisioned.
var ClusterMilestones = []Milestone{Created, InfrastructureProvisioned}

// MachineMilestones are the steps of a Machine, in order.
var MachineMilestones = []Milestone{Created, BootstrapDataCreated, InfrastructureProvisioned, NodeRefSet, MachineRunning}

// ControlPlaneMilestones are the steps of a KubeadmControlPlane, in order.
var ControlPlaneMilestones = []Milestone{ControlPlaneInitialized, ControlPlaneAvailable}

// Milestones hold, for each step, when each object was first seen past it
// (from the first create), sorted: Clusters, control plane Machines, worker
// Machines and KubeadmControlPlanes apart.
type Milestones struct {
	Clusters, ControlPlaneMachines, Workers, ControlPlanes map[Milestone][]time.Duration
}

// Percentile of the times of step in of, or false when no object reached it.
func Percentile(of map[Milestone][]time.Duration, step Milestone, p float64) (time.Duration, bool) {
	times := of[step]
	if len(times) == 0 {
		return 0, false
	}
	return times[int(float64(len(times)-1)*p)], true
}

// milestoneTracker records the first sighting of every step while the wait
// polls the watched objects.
type milestoneTracker struct {
	start    time.Time
	machines map[string]map[Milestone]time.Duration
	cp       map[string]bool
	kcps     map[string]map[Milestone]time.Duration
	clusters map[string]map[Milestone]time.Duration
}

func newMilestoneTracker(start time.Time) *milestoneTracker {
	return &milestoneTracker{
		start:    start,
		machines: map[string]map[Milestone]time.Duration{},
		cp:       map[string]bool{},
		kcps:     map[string]map[Milestone]time.Duration{},
		clusters: map[string]map[Milestone]time.Duration{},
	}
}

// observe records what is first seen at now. Creation comes from the
// object's own timestamp (exact to the second), every other step from the
// poll that first saw it.
func (t *milestoneTracker) observe(now time.Duration, clusters []clusterv1.Cluster, machines []clusterv1.Machine, kcps []controlplanev1.KubeadmControlPlane) {
	for i := range clusters {
		c := &clusters[i]
		seen := t.clusters[c.Name]
		if seen == nil {
			seen = map[Milestone]time.Duration{Created: max(0, c.CreationTimestamp.Sub(t.start))}
			t.clusters[c.Name] = seen
		}
		first(seen, InfrastructureProvisioned, now, ptr.Deref(c.Status.Initialization.InfrastructureProvisioned, false))
	}
	for i := range machines {
		m := &machines[i]
		seen := t.machines[m.Name]
		if seen == nil {
			seen = map[Milestone]time.Duration{Created: max(0, m.CreationTimestamp.Sub(t.start))}
			t.machines[m.Name] = seen
			_, t.cp[m.Name] = m.Labels[clusterv1.MachineControlPlaneLabel]
		}
		first(seen, BootstrapDataCreated, now, ptr.Deref(m.Status.Initialization.BootstrapDataSecretCreated, false))
		first(seen, InfrastructureProvisioned, now, ptr.Deref(m.Status.Initialization.InfrastructureProvisioned, false))
		first(seen, NodeRefSet, now, m.Status.NodeRef.IsDefined())
		first(seen, MachineRunning, now, m.Status.Phase == string(clusterv1.MachinePhaseRunning) && m.Status.NodeRef.IsDefined())
	}
	for i := range kcps {
		k := &kcps[i]
		seen := t.kcps[k.Name]
		if seen == nil {
			seen = map[Milestone]time.Duration{}
			t.kcps[k.Name] = seen
		}
		first(seen, ControlPlaneInitialized, now, ptr.Deref(k.Status.Initialization.ControlPlaneInitialized, false))
		first(seen, ControlPlaneAvailable, now, conditions.IsTrue(k, controlplanev1.KubeadmControlPlaneAvailableCondition))
	}
}

// collect adds every object's steps into.
func collect(into map[Milestone][]time.Duration, objects map[string]map[Milestone]time.Duration) {
	for _, seen := range objects {
		for step, at := range seen {
			into[step] = append(into[step], at)
		}
	}
}

func first(seen map[Milestone]time.Duration, step Milestone, now time.Duration, reached bool) {
	if _, ok := seen[step]; !ok && reached {
		seen[step] = now
	}
}

// result sorts what was seen.
func (t *milestoneTracker) result() Milestones {
	r := Milestones{
		Clusters:             map[Milestone][]time.Duration{},
		ControlPlaneMachines: map[Milestone][]time.Duration{},
		Workers:              map[Milestone][]time.Duration{},
		ControlPlanes:        map[Milestone][]time.Duration{},
	}
	for name, seen := range t.machines {
		into := r.Workers
		if t.cp[name] {
			into = r.ControlPlaneMachines
		}
		for step, at := range seen {
			into[step] = append(into[step], at)
		}
	}
	collect(r.ControlPlanes, t.kcps)
	collect(r.Clusters, t.clusters)
	for _, of := range []map[Milestone][]time.Duration{r.Clusters, r.ControlPlaneMachines, r.Workers, r.ControlPlanes} {
		for _, times := range of {
			slices.Sort(times)
		}
	}
	return r
}

// milestonesTable has, for each step, its p50 / p99 and how many reached
// it, one column per run (named by names): the Clusters', the control plane
// Machines', the KubeadmControlPlanes', then the workers'.
func milestonesTable(names []string, runs []Milestones) *report.Table {
	t := &report.Table{Columns: append([]string{"step, p50 / p99 (how many)"}, names...)}
	rows := func(what string, steps []Milestone, of func(Milestones) map[Milestone][]time.Duration) {
		for _, step := range steps {
			cells := []string{what + " " + string(step)}
			for _, r := range runs {
				times := of(r)
				p50, ok := Percentile(times, step, 0.5)
				if !ok {
					cells = append(cells, "—")
					continue
				}
				p99, _ := Percentile(times, step, 0.99)
				cells = append(cells, fmt.Sprintf("%s / %s (%d)", seconds(p50), seconds(p99), len(times[step])))
			}
			t.Add(cells...)
		}
	}
	rows("Cluster", ClusterMilestones, func(m Milestones) map[Milestone][]time.Duration { return m.Clusters })
	rows("control plane Machine", MachineMilestones, func(m Milestones) map[Milestone][]time.Duration { return m.ControlPlaneMachines })
	rows("KubeadmControlPlane", ControlPlaneMilestones, func(m Milestones) map[Milestone][]time.Duration { return m.ControlPlanes })
	rows("worker Machine", MachineMilestones, func(m Milestones) map[Milestone][]time.Duration { return m.Workers })
	return t
}
