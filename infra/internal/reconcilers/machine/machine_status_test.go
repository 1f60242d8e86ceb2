package machine

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
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
	g.Expect(conditions.GetMessage(mm, clusterv1.ReadyCondition)).To(ContainSubstring("PoolExhausted: MonolithIPPool ns/full has no free address"))
}
