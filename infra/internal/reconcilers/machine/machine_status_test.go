package machine

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	. "github.com/onsi/gomega/gstruct"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/capi-monolith/capi-monolith/contracts/scaffold"
	"github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/infra/internal/addressclaims"
	"github.com/capi-monolith/capi-monolith/infra/internal/backend"
	"github.com/capi-monolith/capi-monolith/infra/internal/bootstrap"
)

func TestSetReady(t *testing.T) {
	cond := func(t string, s metav1.ConditionStatus) metav1.Condition {
		return metav1.Condition{Type: t, Status: s, Reason: "R"}
	}
	tests := []struct {
		name string
		in   []metav1.Condition
		want metav1.ConditionStatus
	}{
		{name: "nothing recorded yet is not ready", want: metav1.ConditionUnknown},
		{name: "provisioned, bootstrap and claims not started is ready", in: []metav1.Condition{
			cond(v1alpha1.BackendMachineProvisionedCondition, metav1.ConditionTrue)}, want: metav1.ConditionTrue},
		{name: "provisioned and bootstrapped is ready", in: []metav1.Condition{
			cond(v1alpha1.BackendMachineProvisionedCondition, metav1.ConditionTrue), cond(v1alpha1.BootstrapExecSucceededCondition, metav1.ConditionTrue)}, want: metav1.ConditionTrue},
		{name: "a running bootstrap is not ready", in: []metav1.Condition{
			cond(v1alpha1.BackendMachineProvisionedCondition, metav1.ConditionTrue), cond(v1alpha1.BootstrapExecSucceededCondition, metav1.ConditionFalse)}, want: metav1.ConditionFalse},
		{name: "waiting for addresses is not ready", in: []metav1.Condition{
			cond(v1alpha1.BackendMachineProvisionedCondition, metav1.ConditionFalse), cond(v1alpha1.IPAddressesClaimedCondition, metav1.ConditionFalse)}, want: metav1.ConditionFalse},
		{name: "a workload cluster not up yet does not make the machine unready", in: []metav1.Condition{
			cond(v1alpha1.BackendMachineProvisionedCondition, metav1.ConditionTrue), cond(v1alpha1.BootstrapExecSucceededCondition, metav1.ConditionTrue),
			cond(v1alpha1.WorkloadNodeProviderIDSetCondition, metav1.ConditionFalse)}, want: metav1.ConditionTrue},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			mm := &v1alpha1.MonolithMachine{}
			for _, c := range tt.in {
				conditions.Set(mm, c)
			}
			g.Expect(setReady(mm)).To(Succeed())
			ready := conditions.Get(mm, clusterv1.ReadyCondition)
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.Status).To(Equal(tt.want))
		})
	}
}

// Cluster API core mirrors the machine's Ready into the Machine's
// InfrastructureReady: an exhausted pool's reason and name must be in it.
func TestReadyCarriesWhyAnIPPoolCannotServeTheMachine(t *testing.T) {
	g := NewWithT(t)
	mm := &v1alpha1.MonolithMachine{}
	conditions.Set(mm, metav1.Condition{Type: v1alpha1.BackendMachineProvisionedCondition, Status: metav1.ConditionFalse, Reason: v1alpha1.WaitingForIPAddressesReason})
	conditions.Set(mm, metav1.Condition{Type: v1alpha1.IPAddressesClaimedCondition, Status: metav1.ConditionFalse, Reason: "PoolExhausted",
		Message: "IPAddressClaim m-1: PoolExhausted: MonolithIPPool ns/full has no free address; Waiting for 1 of 2 IP addresses"})
	g.Expect(setReady(mm)).To(Succeed())
	ready := conditions.Get(mm, clusterv1.ReadyCondition)
	g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(ready.Reason).To(Equal("PoolExhausted"), "the claims' reason, not the provisioning's that waits for them")
	g.Expect(ready.Message).To(HavePrefix("* IPAddressesClaimed: IPAddressClaim m-1: PoolExhausted: MonolithIPPool ns/full has no free address"))

	// Once the pool serves the machine the reason is gone with the issue.
	conditions.Set(mm, metav1.Condition{Type: v1alpha1.IPAddressesClaimedCondition, Status: metav1.ConditionTrue, Reason: v1alpha1.ClaimedReason})
	conditions.Set(mm, metav1.Condition{Type: v1alpha1.BackendMachineProvisionedCondition, Status: metav1.ConditionFalse, Reason: v1alpha1.RunningReason, Message: "Waiting for the node to be created"})
	g.Expect(setReady(mm)).To(Succeed())
	ready = conditions.Get(mm, clusterv1.ReadyCondition)
	g.Expect(ready.Reason).To(Equal(v1alpha1.RunningReason))
	g.Expect(ready.Message).NotTo(ContainSubstring("PoolExhausted"))
	conditions.Set(mm, metav1.Condition{Type: v1alpha1.BackendMachineProvisionedCondition, Status: metav1.ConditionTrue, Reason: v1alpha1.ProvisionedReason})
	g.Expect(setReady(mm)).To(Succeed())
	g.Expect(conditions.IsTrue(mm, clusterv1.ReadyCondition)).To(BeTrue())
	g.Expect(conditions.GetReason(mm, clusterv1.ReadyCondition)).To(Equal(scaffold.ReadyReason))
}

func TestSetNodeStatus(t *testing.T) {
	node := &backend.Node{
		ProviderID:    "docker:////c-m",
		Addresses:     []clusterv1.MachineAddress{{Type: clusterv1.MachineHostName, Address: "c-m"}},
		FailureDomain: "fd-a",
		Provisioned:   true,
	}
	tests := []struct {
		name string
		node *backend.Node
		want v1alpha1.MonolithMachineStatus
	}{
		{name: "no node found leaves the status as it was", want: v1alpha1.MonolithMachineStatus{FailureDomain: "before"}},
		{name: "a provisioned node reports its addresses, failure domain and provisioned", node: node, want: v1alpha1.MonolithMachineStatus{
			Addresses: node.Addresses, FailureDomain: "fd-a",
			Initialization: v1alpha1.Initialization{Provisioned: ptr.To(true)},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			mm := &v1alpha1.MonolithMachine{Status: v1alpha1.MonolithMachineStatus{FailureDomain: "before"}}
			setNodeStatus(mm, tt.node)
			g.Expect(mm.Status).To(Equal(tt.want))
		})
	}
}

// conditionCase is one row of the tables of the condition setters: what a
// phase found, and the condition it makes (nil: none set).
type conditionCase[P any] struct {
	name string
	in   *P
	want *metav1.Condition
}

func runConditionCases[P any](t *testing.T, conditionType string, set func(*v1alpha1.MonolithMachine, *P), tests []conditionCase[P]) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			mm := &v1alpha1.MonolithMachine{ObjectMeta: metav1.ObjectMeta{Generation: 3}}
			set(mm, tt.in)
			got := conditions.Get(mm, conditionType)
			if tt.want == nil {
				g.Expect(got).To(BeNil())
				return
			}
			g.Expect(got).NotTo(BeNil())
			g.Expect(*got).To(MatchFields(IgnoreExtras, Fields{
				"Type": Equal(conditionType), "Status": Equal(tt.want.Status), "Reason": Equal(tt.want.Reason),
				"Message": Equal(tt.want.Message), "ObservedGeneration": Equal(int64(3)),
			}))
		})
	}
}

func TestSetBackendMachineProvisionedCondition(t *testing.T) {
	runConditionCases(t, v1alpha1.BackendMachineProvisionedCondition, setBackendMachineProvisionedCondition, []conditionCase[scaffold.Progress]{
		{name: "nothing found leaves the condition unset"},
		{name: "a provisioned node is Provisioned", in: &scaffold.Progress{Done: true},
			want: &metav1.Condition{Status: metav1.ConditionTrue, Reason: v1alpha1.ProvisionedReason}},
		{name: "waiting for the cluster's infrastructure says so", in: scaffold.NotDone(v1alpha1.WaitingForClusterInfrastructureReason, ""),
			want: &metav1.Condition{Status: metav1.ConditionFalse, Reason: v1alpha1.WaitingForClusterInfrastructureReason}},
		{name: "a node being created is Running with a message", in: scaffold.NotDone(v1alpha1.RunningReason, "Waiting for the node to be created"),
			want: &metav1.Condition{Status: metav1.ConditionFalse, Reason: v1alpha1.RunningReason, Message: "Waiting for the node to be created"}},
		{name: "a failed backend call is Failed with the error", in: scaffold.NotDone(v1alpha1.FailedReason, "boom"),
			want: &metav1.Condition{Status: metav1.ConditionFalse, Reason: v1alpha1.FailedReason, Message: "boom"}},
	})
}

func TestSetIPAddressesClaimedCondition(t *testing.T) {
	runConditionCases(t, v1alpha1.IPAddressesClaimedCondition, setIPAddressesClaimedCondition, []conditionCase[addressclaims.Progress]{
		{name: "a machine that names no pool gets no condition"},
		{name: "every claim fulfilled is Claimed", in: &addressclaims.Progress{Claimed: true},
			want: &metav1.Condition{Status: metav1.ConditionTrue, Reason: v1alpha1.ClaimedReason}},
		{name: "claims pending are waiting, with how many", in: &addressclaims.Progress{Reason: v1alpha1.WaitingForIPAddressesReason, Message: "Waiting for 1 of 2 IP addresses"},
			want: &metav1.Condition{Status: metav1.ConditionFalse, Reason: v1alpha1.WaitingForIPAddressesReason, Message: "Waiting for 1 of 2 IP addresses"}},
	})
}

func TestSetBootstrapExecSucceededCondition(t *testing.T) {
	runConditionCases(t, v1alpha1.BootstrapExecSucceededCondition, setBootstrapExecSucceededCondition, []conditionCase[bootstrap.Progress]{
		{name: "a bootstrap not started leaves the condition unset"},
		{name: "a finished bootstrap is Succeeded", in: &bootstrap.Progress{Succeeded: true},
			want: &metav1.Condition{Status: metav1.ConditionTrue, Reason: v1alpha1.SucceededReason}},
		{name: "a running bootstrap is Running with its progress", in: &bootstrap.Progress{Reason: v1alpha1.RunningReason, Message: "kubeadm join"},
			want: &metav1.Condition{Status: metav1.ConditionFalse, Reason: v1alpha1.RunningReason, Message: "kubeadm join"}},
		{name: "a failed bootstrap is Failed with the error", in: &bootstrap.Progress{Reason: v1alpha1.FailedReason, Message: "exit 1"},
			want: &metav1.Condition{Status: metav1.ConditionFalse, Reason: v1alpha1.FailedReason, Message: "exit 1"}},
	})
}

func TestSetWorkloadNodeProviderIDSetCondition(t *testing.T) {
	runConditionCases(t, v1alpha1.WorkloadNodeProviderIDSetCondition, setWorkloadNodeProviderIDSetCondition, []conditionCase[scaffold.Progress]{
		{name: "a node not looked at leaves the condition unset"},
		{name: "a Node with the provider ID is Set", in: &scaffold.Progress{Done: true},
			want: &metav1.Condition{Status: metav1.ConditionTrue, Reason: v1alpha1.SetReason}},
		{name: "a Node not registered yet is waited for", in: scaffold.NotDone(v1alpha1.WaitingForNodeReason, "Node m is not registered in the workload cluster yet"),
			want: &metav1.Condition{Status: metav1.ConditionFalse, Reason: v1alpha1.WaitingForNodeReason, Message: "Node m is not registered in the workload cluster yet"}},
		{name: "a Node with another provider ID is a mismatch", in: scaffold.NotDone(v1alpha1.ProviderIDMismatchReason, "Node m has provider ID a, not b"),
			want: &metav1.Condition{Status: metav1.ConditionFalse, Reason: v1alpha1.ProviderIDMismatchReason, Message: "Node m has provider ID a, not b"}},
	})
}

// The conditions of steps that later reconciles skip follow the status
// fields the phases set, whatever this reconcile found.
func TestConditionsFollowTheStatusFields(t *testing.T) {
	tests := []struct {
		name          string
		status        v1alpha1.MonolithMachineStatus
		set           func(*v1alpha1.MonolithMachine)
		conditionType string
		wantReason    string
	}{
		{name: "a machine bootstrapped earlier is Succeeded when the phases did not get to the bootstrap",
			status:        v1alpha1.MonolithMachineStatus{Bootstrap: v1alpha1.MonolithMachineBootstrapStatus{Succeeded: ptr.To(true)}},
			set:           func(mm *v1alpha1.MonolithMachine) { setBootstrapExecSucceededCondition(mm, nil) },
			conditionType: v1alpha1.BootstrapExecSucceededCondition, wantReason: v1alpha1.SucceededReason},
		{name: "a Node given its provider ID earlier is Set when the phases did not look at it",
			status:        v1alpha1.MonolithMachineStatus{WorkloadNode: v1alpha1.MonolithMachineWorkloadNodeStatus{ProviderIDSet: ptr.To(true)}},
			set:           func(mm *v1alpha1.MonolithMachine) { setWorkloadNodeProviderIDSetCondition(mm, nil) },
			conditionType: v1alpha1.WorkloadNodeProviderIDSetCondition, wantReason: v1alpha1.SetReason},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			mm := &v1alpha1.MonolithMachine{ObjectMeta: metav1.ObjectMeta{Generation: 3}, Status: tt.status}
			tt.set(mm)
			got := conditions.Get(mm, tt.conditionType)
			g.Expect(got).NotTo(BeNil())
			g.Expect(got.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(got.Reason).To(Equal(tt.wantReason))
			g.Expect(got.ObservedGeneration).To(Equal(int64(3)))
		})
	}
}

func TestAdoptLegacyConditions(t *testing.T) {
	since := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	cond := func(t string, s metav1.ConditionStatus) metav1.Condition {
		return metav1.Condition{Type: t, Status: s, Reason: "R", LastTransitionTime: since}
	}
	bootstrapped := v1alpha1.MonolithMachineBootstrapStatus{Succeeded: ptr.To(true)}
	tests := []struct {
		name             string
		conditions       []metav1.Condition
		bootstrap        v1alpha1.MonolithMachineBootstrapStatus
		workloadNode     v1alpha1.MonolithMachineWorkloadNodeStatus
		wantBootstrap    v1alpha1.MonolithMachineBootstrapStatus
		wantWorkloadNode v1alpha1.MonolithMachineWorkloadNodeStatus
	}{
		{name: "a machine without the old conditions gets no fields"},
		{name: "an old machine bootstrapped is recorded as bootstrapped",
			conditions: []metav1.Condition{cond(v1alpha1.BootstrapExecSucceededCondition, metav1.ConditionTrue)}, wantBootstrap: bootstrapped},
		{name: "an old machine still bootstrapping is not recorded as bootstrapped",
			conditions: []metav1.Condition{cond(v1alpha1.BootstrapExecSucceededCondition, metav1.ConditionFalse)}},
		{name: "an old machine whose Node has its provider ID is recorded as set",
			conditions:       []metav1.Condition{cond(v1alpha1.WorkloadNodeProviderIDSetCondition, metav1.ConditionTrue)},
			wantWorkloadNode: v1alpha1.MonolithMachineWorkloadNodeStatus{ProviderIDSet: ptr.To(true)}},
		{name: "an old machine still waiting for its Node keeps backing off from when it started",
			conditions:       []metav1.Condition{cond(v1alpha1.WorkloadNodeProviderIDSetCondition, metav1.ConditionFalse)},
			wantWorkloadNode: v1alpha1.MonolithMachineWorkloadNodeStatus{ProviderIDStartTime: since}},
		{name: "a machine this release bootstrapped adopts nothing, not a failed registration's condition as a start time",
			conditions: []metav1.Condition{cond(v1alpha1.BootstrapExecSucceededCondition, metav1.ConditionTrue),
				cond(v1alpha1.WorkloadNodeProviderIDSetCondition, metav1.ConditionFalse)},
			bootstrap: bootstrapped, wantBootstrap: bootstrapped},
		{name: "an old machine bootstrapped and waiting for its Node adopts both",
			conditions: []metav1.Condition{cond(v1alpha1.BootstrapExecSucceededCondition, metav1.ConditionTrue),
				cond(v1alpha1.WorkloadNodeProviderIDSetCondition, metav1.ConditionFalse)},
			wantBootstrap: bootstrapped, wantWorkloadNode: v1alpha1.MonolithMachineWorkloadNodeStatus{ProviderIDStartTime: since}},
		{name: "fields already set win over the conditions",
			conditions: []metav1.Condition{cond(v1alpha1.BootstrapExecSucceededCondition, metav1.ConditionTrue),
				cond(v1alpha1.WorkloadNodeProviderIDSetCondition, metav1.ConditionTrue)},
			bootstrap:        v1alpha1.MonolithMachineBootstrapStatus{Succeeded: ptr.To(false)},
			workloadNode:     v1alpha1.MonolithMachineWorkloadNodeStatus{ProviderIDStartTime: metav1.NewTime(since.Add(time.Hour))},
			wantBootstrap:    v1alpha1.MonolithMachineBootstrapStatus{Succeeded: ptr.To(false)},
			wantWorkloadNode: v1alpha1.MonolithMachineWorkloadNodeStatus{ProviderIDStartTime: metav1.NewTime(since.Add(time.Hour))}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			mm := &v1alpha1.MonolithMachine{Status: v1alpha1.MonolithMachineStatus{
				Conditions: tt.conditions, Bootstrap: tt.bootstrap, WorkloadNode: tt.workloadNode,
			}}
			adoptLegacyConditions(mm)
			g.Expect(mm.Status.Bootstrap).To(Equal(tt.wantBootstrap))
			g.Expect(mm.Status.WorkloadNode).To(Equal(tt.wantWorkloadNode))
			g.Expect(mm.Status.Conditions).To(Equal(tt.conditions), "the conditions stay as they were")
		})
	}
}

func TestWorkloadRecheck(t *testing.T) {
	ago := func(d time.Duration) metav1.Time { return metav1.NewTime(time.Now().Add(-d)) }
	tests := []struct {
		name    string
		status  v1alpha1.MonolithMachineWorkloadNodeStatus
		atLeast time.Duration
		atMost  time.Duration
	}{
		{name: "a first attempt looks again after the least wait", atLeast: workloadRecheckMin, atMost: workloadRecheckMin},
		{name: "an attempt that just started looks again after the least wait", status: v1alpha1.MonolithMachineWorkloadNodeStatus{ProviderIDStartTime: ago(0)},
			atLeast: workloadRecheckMin, atMost: workloadRecheckMin},
		{name: "after a minute of trying it waits about a minute", status: v1alpha1.MonolithMachineWorkloadNodeStatus{ProviderIDStartTime: ago(time.Minute)},
			atLeast: time.Minute, atMost: time.Minute + 10*time.Second},
		{name: "after an hour of trying it waits the most", status: v1alpha1.MonolithMachineWorkloadNodeStatus{ProviderIDStartTime: ago(time.Hour)},
			atLeast: workloadRecheckMax, atMost: workloadRecheckMax},
		{name: "a provider ID already set looks again after the least wait", status: v1alpha1.MonolithMachineWorkloadNodeStatus{ProviderIDSet: ptr.To(true), ProviderIDStartTime: ago(time.Hour)},
			atLeast: workloadRecheckMin, atMost: workloadRecheckMin},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got := workloadRecheck(&v1alpha1.MonolithMachine{Status: v1alpha1.MonolithMachineStatus{WorkloadNode: tt.status}})
			g.Expect(got).To(BeNumerically(">=", tt.atLeast))
			g.Expect(got).To(BeNumerically("<=", tt.atMost))
		})
	}
}
