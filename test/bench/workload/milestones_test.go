package main

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// Each step counts from the poll that first saw it, creation from the
// object's own timestamp; control plane Machines and workers are apart, and
// a step seen again later keeps its first time.
func TestMilestonesRecordTheFirstSightingOfEachStep(t *testing.T) {
	g := NewWithT(t)
	start := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	track := newMilestoneTracker(start)
	cp := clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{
		Name: "cp", CreationTimestamp: metav1.NewTime(start.Add(2 * time.Second)),
		Labels: map[string]string{clusterv1.MachineControlPlaneLabel: ""},
	}}
	worker := clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "w", CreationTimestamp: metav1.NewTime(start.Add(3 * time.Second))}}
	kcp := controlplanev1.KubeadmControlPlane{ObjectMeta: metav1.ObjectMeta{Name: "kcp"}}
	cluster := clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "c", CreationTimestamp: metav1.NewTime(start.Add(time.Second))}}

	track.observe(5*time.Second, []clusterv1.Cluster{cluster}, []clusterv1.Machine{cp, worker}, []controlplanev1.KubeadmControlPlane{kcp})
	cp.Status.Initialization.BootstrapDataSecretCreated = ptr.To(true)
	cp.Status.Initialization.InfrastructureProvisioned = ptr.To(true)
	cluster.Status.Initialization.InfrastructureProvisioned = ptr.To(true)
	track.observe(10*time.Second, []clusterv1.Cluster{cluster}, []clusterv1.Machine{cp, worker}, []controlplanev1.KubeadmControlPlane{kcp})
	cp.Status.NodeRef = clusterv1.MachineNodeReference{Name: "cp"}
	cp.Status.Phase = string(clusterv1.MachinePhaseRunning)
	kcp.Status.Initialization.ControlPlaneInitialized = ptr.To(true)
	track.observe(15*time.Second, []clusterv1.Cluster{cluster}, []clusterv1.Machine{cp, worker}, []controlplanev1.KubeadmControlPlane{kcp})
	kcp.Status.Conditions = []metav1.Condition{{Type: controlplanev1.KubeadmControlPlaneAvailableCondition, Status: metav1.ConditionTrue}}
	worker.Status.Initialization.BootstrapDataSecretCreated = ptr.To(true)
	track.observe(20*time.Second, nil, []clusterv1.Machine{cp, worker}, []controlplanev1.KubeadmControlPlane{kcp})

	got := track.result()
	g.Expect(got.Clusters).To(Equal(map[Milestone][]time.Duration{
		Created:                   {time.Second},
		InfrastructureProvisioned: {10 * time.Second},
	}))
	g.Expect(got.ControlPlaneMachines).To(Equal(map[Milestone][]time.Duration{
		Created:                   {2 * time.Second},
		BootstrapDataCreated:      {10 * time.Second},
		InfrastructureProvisioned: {10 * time.Second},
		NodeRefSet:                {15 * time.Second},
		MachineRunning:            {15 * time.Second},
	}))
	g.Expect(got.Workers).To(Equal(map[Milestone][]time.Duration{
		Created:              {3 * time.Second},
		BootstrapDataCreated: {20 * time.Second},
	}))
	g.Expect(got.ControlPlanes).To(Equal(map[Milestone][]time.Duration{
		ControlPlaneInitialized: {15 * time.Second},
		ControlPlaneAvailable:   {20 * time.Second},
	}))
	_, reached := Percentile(got.Workers, MachineRunning, 0.5)
	g.Expect(reached).To(BeFalse(), "no worker ran")
}
