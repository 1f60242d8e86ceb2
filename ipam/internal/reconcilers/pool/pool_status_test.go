package pool

import (
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/capi-monolith/capi-monolith/ipam/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/ipam/internal/allocator"
)

func TestSetIPAddresses(t *testing.T) {
	before := &v1alpha1.IPAddressesStatus{Total: 9}
	tests := []struct {
		name string
		in   results
		want *v1alpha1.IPAddressesStatus
	}{
		{name: "nothing counted leaves the counts as they were", want: before},
		{name: "counted addresses are reported", in: results{counts: &allocator.Int64Counts{Total: 4, Used: 1, Free: 3, OutOfRange: 2, Capped: true}},
			want: &v1alpha1.IPAddressesStatus{Total: 4, Used: 1, Free: 3, OutOfRange: 2, Capped: true}},
		{name: "an invalid pool reports no counts", in: results{invalidSpec: errors.New("bad range")}},
		{name: "a blocked deletion leaves the counts as they were", in: results{blockingDeletion: 1}, want: before},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			for _, pool := range []v1alpha1.Pool{&v1alpha1.MonolithIPPool{}, &v1alpha1.GlobalMonolithIPPool{}} {
				pool.GetStatus().IPAddresses = before
				setIPAddresses(pool, tt.in)
				g.Expect(pool.GetStatus().IPAddresses).To(Equal(tt.want), "%T", pool)
			}
		})
	}
}

func TestSetReadyCondition(t *testing.T) {
	tests := []struct {
		name string
		in   results
		want *metav1.Condition
	}{
		{name: "nothing found leaves Ready unset"},
		{name: "a counted pool is Ready", in: results{counts: &allocator.Int64Counts{Total: 2}},
			want: &metav1.Condition{Status: metav1.ConditionTrue, Reason: v1alpha1.ReadyReason}},
		{name: "an invalid pool is not Ready, with why", in: results{invalidSpec: errors.New("bad range")},
			want: &metav1.Condition{Status: metav1.ConditionFalse, Reason: v1alpha1.InvalidSpecReason, Message: "bad range"}},
		{name: "a deletion held by allocated addresses says how many and how to skip it", in: results{blockingDeletion: 3},
			want: &metav1.Condition{Status: metav1.ConditionFalse, Reason: v1alpha1.DeletionBlockedReason,
				Message: "Deletion waits for 3 allocated addresses to be released (or annotate the pool with " + v1alpha1.SkipDeleteProtectionAnnotation + "=true)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			for _, pool := range []v1alpha1.Pool{&v1alpha1.MonolithIPPool{}, &v1alpha1.GlobalMonolithIPPool{}} {
				pool.SetGeneration(5)
				setReadyCondition(pool, tt.in)
				got := conditions.Get(pool, v1alpha1.ReadyCondition)
				if tt.want == nil {
					g.Expect(got).To(BeNil(), "%T", pool)
					continue
				}
				g.Expect(got).NotTo(BeNil(), "%T", pool)
				g.Expect(got.Status).To(Equal(tt.want.Status))
				g.Expect(got.Reason).To(Equal(tt.want.Reason))
				g.Expect(got.Message).To(Equal(tt.want.Message))
				g.Expect(got.ObservedGeneration).To(Equal(int64(5)))
			}
		})
	}
}
