package cluster

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/capi-monolith/capi-monolith/contracts/scaffold"
	"github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
)

func TestSetProvisioned(t *testing.T) {
	domains := []clusterv1.FailureDomain{{Name: "fd-a", ControlPlane: ptr.To(true)}}
	tests := []struct {
		name        string
		provisioned bool
		want        v1alpha1.MonolithClusterStatus
	}{
		{name: "infrastructure not provisioned leaves the status as it was"},
		{name: "provisioned infrastructure reports the spec's failure domains and provisioned", provisioned: true,
			want: v1alpha1.MonolithClusterStatus{FailureDomains: domains, Initialization: v1alpha1.Initialization{Provisioned: ptr.To(true)}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			mc := &v1alpha1.MonolithCluster{Spec: v1alpha1.MonolithClusterSpec{FailureDomains: domains}}
			setProvisioned(mc, tt.provisioned)
			g.Expect(mc.Status).To(Equal(tt.want))
		})
	}
}

func TestSetLoadBalancerAvailableCondition(t *testing.T) {
	tests := []struct {
		name string
		in   *scaffold.Progress
		want *metav1.Condition
	}{
		{name: "nothing found leaves the condition unset"},
		{name: "a provisioned load balancer is available", in: &scaffold.Progress{Done: true},
			want: &metav1.Condition{Status: metav1.ConditionTrue, Reason: v1alpha1.ProvisionedReason}},
		{name: "an endpoint held by another process is waited for", in: scaffold.NotDone(v1alpha1.WaitingForEndpointReason, "in use"),
			want: &metav1.Condition{Status: metav1.ConditionFalse, Reason: v1alpha1.WaitingForEndpointReason, Message: "in use"}},
		{name: "a failed backend is Failed with the error", in: scaffold.NotDone(v1alpha1.FailedReason, "Failed to provision the load balancer"),
			want: &metav1.Condition{Status: metav1.ConditionFalse, Reason: v1alpha1.FailedReason, Message: "Failed to provision the load balancer"}},
		{name: "a cluster being deleted says so", in: scaffold.NotDone(v1alpha1.DeletingReason, ""),
			want: &metav1.Condition{Status: metav1.ConditionFalse, Reason: v1alpha1.DeletingReason}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			mc := &v1alpha1.MonolithCluster{ObjectMeta: metav1.ObjectMeta{Generation: 2}}
			setLoadBalancerAvailableCondition(mc, tt.in)
			got := conditions.Get(mc, v1alpha1.LoadBalancerAvailableCondition)
			if tt.want == nil {
				g.Expect(got).To(BeNil())
				return
			}
			g.Expect(got).NotTo(BeNil())
			g.Expect(got.Status).To(Equal(tt.want.Status))
			g.Expect(got.Reason).To(Equal(tt.want.Reason))
			g.Expect(got.Message).To(Equal(tt.want.Message))
			g.Expect(got.ObservedGeneration).To(Equal(int64(2)))
		})
	}
}

func TestSetReady(t *testing.T) {
	tests := []struct {
		name         string
		loadBalancer *metav1.ConditionStatus
		want         metav1.ConditionStatus
	}{
		{name: "nothing recorded yet is not ready", want: metav1.ConditionUnknown},
		{name: "an available load balancer is ready", loadBalancer: ptr.To(metav1.ConditionTrue), want: metav1.ConditionTrue},
		{name: "an unavailable load balancer is not ready", loadBalancer: ptr.To(metav1.ConditionFalse), want: metav1.ConditionFalse},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			mc := &v1alpha1.MonolithCluster{}
			if tt.loadBalancer != nil {
				conditions.Set(mc, metav1.Condition{Type: v1alpha1.LoadBalancerAvailableCondition, Status: *tt.loadBalancer, Reason: "R"})
			}
			g.Expect(setReady(mc)).To(Succeed())
			g.Expect(conditions.Get(mc, clusterv1.ReadyCondition).Status).To(Equal(tt.want))
		})
	}
}
