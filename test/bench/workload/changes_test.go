package main

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// An update is counted under what it changed: a new generation, metadata,
// each status field, each condition by type (a new transition time alone
// is not a change of its own), "other" when none of these.
func TestChangedFieldsNamesWhatAnUpdateChanged(t *testing.T) {
	g := NewWithT(t)
	old := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Generation: 1, ResourceVersion: "1"}}
	old.Status.Conditions = []metav1.Condition{
		{Type: "MachinesReady", Status: metav1.ConditionFalse, Message: "* Machine a: waiting"},
		{Type: "Available", Status: metav1.ConditionFalse},
		{Type: "Gone", Status: metav1.ConditionTrue},
	}

	updated := old.DeepCopy()
	updated.ResourceVersion = "2"
	updated.Status.Conditions = []metav1.Condition{
		{Type: "MachinesReady", Status: metav1.ConditionFalse, Message: "* Machine b: waiting"},
		{Type: "Available", Status: metav1.ConditionFalse, LastTransitionTime: metav1.Now()},
		{Type: "New", Status: metav1.ConditionTrue},
	}
	updated.Status.Initialization.InfrastructureProvisioned = ptr.To(true)
	g.Expect(changedFields(old, updated)).To(ConsistOf(
		"status.conditions[MachinesReady]", "status.conditions[New]", "status.conditions[Gone]", "status.initialization"))

	respec := old.DeepCopy()
	respec.Generation = 2
	respec.Labels = map[string]string{"a": "b"}
	g.Expect(changedFields(old, respec)).To(ConsistOf("spec", "metadata"))

	managedOnly := old.DeepCopy()
	managedOnly.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "x"}}
	g.Expect(changedFields(old, managedOnly)).To(ConsistOf("other"))
}

// The counter counts updates only, by kind, and an event that repeats a
// resourceVersion (a resync) not at all.
func TestChangeCounterCountsUpdatesByKind(t *testing.T) {
	g := NewWithT(t)
	c := newChangeCounter()
	h := c.handler("Cluster")
	old := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "1"}}
	newer := old.DeepCopy()
	newer.ResourceVersion = "2"
	newer.Status.Phase = "Provisioned"
	h.OnAdd(old, false)
	h.OnUpdate(old, newer)
	h.OnUpdate(newer, newer)
	h.OnDelete(newer)
	g.Expect(c.Counts()).To(Equal(map[string]float64{"Cluster status.phase": 1}))
}
