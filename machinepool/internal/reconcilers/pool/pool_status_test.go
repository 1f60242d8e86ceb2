package pool

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	infrav1 "github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/machinepool/api/v1alpha1"
)

// instance is a pool instance; provisioned ones have a provider ID and,
// when ready, a bootstrap that succeeded.
func instance(name string, provisioned, ready bool) infrav1.MonolithMachine {
	mm := infrav1.MonolithMachine{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if provisioned {
		mm.Spec.ProviderID = "docker:////" + name
		mm.Status.Initialization.Provisioned = ptr.To(true)
	}
	if ready {
		mm.Status.Bootstrap.Succeeded = ptr.To(true)
	}
	return mm
}

func TestReportInstances(t *testing.T) {
	tests := []struct {
		name          string
		instances     []infrav1.MonolithMachine
		desired       int
		deleting      bool
		readyBefore   bool
		wantIDs       []string
		wantReplicas  int32
		wantReady     bool
		wantProvision bool
	}{
		{name: "no instance yet is not ready", desired: 1, wantIDs: []string{}},
		{name: "instances without a provider ID are not counted", instances: []infrav1.MonolithMachine{instance("p-a", false, false)}, desired: 1,
			wantIDs: []string{}},
		{name: "a provider ID written with the finalizer, before the node, is not counted", desired: 1,
			instances: []infrav1.MonolithMachine{func() infrav1.MonolithMachine {
				mm := instance("p-a", false, false)
				mm.Spec.ProviderID = "inmemory://ns/p-a"
				return mm
			}()},
			wantIDs: []string{}},
		{name: "every desired instance provisioned makes the pool ready and provisioned", desired: 2,
			instances: []infrav1.MonolithMachine{instance("p-b", true, true), instance("p-a", true, false)},
			wantIDs:   []string{"docker:////p-a", "docker:////p-b"}, wantReplicas: 2, wantReady: true, wantProvision: true},
		{name: "a pool once ready stays ready while it scales", desired: 2, readyBefore: true,
			instances: []infrav1.MonolithMachine{instance("p-a", true, true)},
			wantIDs:   []string{"docker:////p-a"}, wantReplicas: 1, wantReady: true, wantProvision: true},
		{name: "a pool being deleted reports its instances but not ready", desired: 0, deleting: true,
			instances: []infrav1.MonolithMachine{instance("p-a", true, true)},
			wantIDs:   []string{"docker:////p-a"}, wantReplicas: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			pool := &v1alpha1.MonolithMachinePool{}
			pool.Status.Ready = tt.readyBefore
			if tt.deleting {
				pool.DeletionTimestamp = ptr.To(metav1.Now())
			}
			reportInstances(pool, &observation{instances: tt.instances}, tt.desired)
			g.Expect(pool.Spec.ProviderIDList).To(Equal(tt.wantIDs))
			g.Expect(pool.Status.Replicas).To(Equal(tt.wantReplicas))
			g.Expect(pool.Status.Instances).To(HaveLen(len(tt.instances)))
			g.Expect(pool.Status.Ready).To(Equal(tt.wantReady))
			g.Expect(ptr.Deref(pool.Status.Initialization.Provisioned, false)).To(Equal(tt.wantProvision))
		})
	}
}

func TestSetInstancesReadyCondition(t *testing.T) {
	ready := member{name: "p-a", ready: true}
	tests := []struct {
		name        string
		in          results
		wantStatus  metav1.ConditionStatus
		wantReason  string
		wantMessage string
	}{
		{name: "nothing found leaves the condition unset"},
		{name: "a pool without its MachinePool waits for it", in: results{notReady: &notReady{reason: v1alpha1.WaitingForMachinePoolReason}},
			wantStatus: metav1.ConditionFalse, wantReason: v1alpha1.WaitingForMachinePoolReason},
		{name: "an invalid configuration says what is wrong", in: results{notReady: &notReady{reason: v1alpha1.InvalidConfigurationReason, message: "bad"}},
			wantStatus: metav1.ConditionFalse, wantReason: v1alpha1.InvalidConfigurationReason, wantMessage: "bad"},
		{name: "a pool being deleted counts its instances", in: results{notReady: &notReady{reason: infrav1.DeletingReason, message: "Deleting 2 instances"}},
			wantStatus: metav1.ConditionFalse, wantReason: infrav1.DeletingReason, wantMessage: "Deleting 2 instances"},
		{name: "outdated instances are rolling out", in: results{summary: &summary{instances: 1, members: []member{{name: "p-a", outdated: true}}, desired: 1}},
			wantStatus: metav1.ConditionFalse, wantReason: v1alpha1.RollingOutReason, wantMessage: "1 of 1 instances outdated"},
		{name: "fewer instances than desired is scaling up", in: results{summary: &summary{instances: 1, members: []member{ready}, desired: 3}},
			wantStatus: metav1.ConditionFalse, wantReason: v1alpha1.ScalingUpReason, wantMessage: "1 of 3 instances"},
		{name: "instances going away is scaling down", in: results{summary: &summary{instances: 2, members: []member{ready}, desired: 1}},
			wantStatus: metav1.ConditionFalse, wantReason: v1alpha1.ScalingDownReason, wantMessage: "1 instances, 1 desired, 1 being deleted"},
		{name: "instances not ready yet are waited for", in: results{summary: &summary{instances: 1, members: []member{{name: "p-a"}}, desired: 1}},
			wantStatus: metav1.ConditionFalse, wantReason: v1alpha1.WaitingForInstancesReason, wantMessage: "0 of 1 instances ready"},
		{name: "every desired instance ready and up to date is ready", in: results{summary: &summary{instances: 1, members: []member{ready}, desired: 1}},
			wantStatus: metav1.ConditionTrue, wantReason: v1alpha1.InstancesReadyReason},
		{name: "no instance desired and none there is ready", in: results{summary: &summary{}},
			wantStatus: metav1.ConditionTrue, wantReason: v1alpha1.InstancesReadyReason},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			pool := &v1alpha1.MonolithMachinePool{ObjectMeta: metav1.ObjectMeta{Generation: 4}}
			setInstancesReadyCondition(pool, tt.in)
			got := conditions.Get(pool, v1alpha1.InstancesReadyCondition)
			if tt.wantReason == "" {
				g.Expect(got).To(BeNil())
				return
			}
			g.Expect(got).NotTo(BeNil())
			g.Expect(got.Status).To(Equal(tt.wantStatus))
			g.Expect(got.Reason).To(Equal(tt.wantReason))
			g.Expect(got.Message).To(Equal(tt.wantMessage))
			g.Expect(got.ObservedGeneration).To(Equal(int64(4)))
		})
	}
}

func TestSetReady(t *testing.T) {
	tests := []struct {
		name      string
		instances *metav1.ConditionStatus
		want      metav1.ConditionStatus
	}{
		{name: "nothing recorded yet is not ready", want: metav1.ConditionUnknown},
		{name: "ready instances make the pool ready", instances: ptr.To(metav1.ConditionTrue), want: metav1.ConditionTrue},
		{name: "instances not ready make the pool not ready", instances: ptr.To(metav1.ConditionFalse), want: metav1.ConditionFalse},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			pool := &v1alpha1.MonolithMachinePool{}
			if tt.instances != nil {
				conditions.Set(pool, metav1.Condition{Type: v1alpha1.InstancesReadyCondition, Status: *tt.instances, Reason: "R"})
			}
			g.Expect(setReady(pool)).To(Succeed())
			g.Expect(conditions.Get(pool, clusterv1.ReadyCondition).Status).To(Equal(tt.want))
		})
	}
}
