package v1alpha1_test

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"

	"github.com/capi-monolith/capi-monolith/ipam/api/v1alpha1"
)

func TestPoolKinds(t *testing.T) {
	g := NewWithT(t)
	g.Expect(v1alpha1.PoolKindNames()).To(Equal([]string{"MonolithIPPool", "GlobalMonolithIPPool"}))

	k, ok := v1alpha1.PoolKindNamed("MonolithIPPool")
	g.Expect(ok).To(BeTrue())
	g.Expect(k.New()).To(BeAssignableToTypeOf(&v1alpha1.MonolithIPPool{}))
	g.Expect(k.Key("ns", "p")).To(Equal(types.NamespacedName{Namespace: "ns", Name: "p"}))

	k, ok = v1alpha1.PoolKindNamed("GlobalMonolithIPPool")
	g.Expect(ok).To(BeTrue())
	g.Expect(k.New()).To(BeAssignableToTypeOf(&v1alpha1.GlobalMonolithIPPool{}))
	g.Expect(k.Key("ns", "p")).To(Equal(types.NamespacedName{Name: "p"}), "cluster-scoped: the referring namespace is not used")

	_, ok = v1alpha1.PoolKindNamed("InClusterIPPool")
	g.Expect(ok).To(BeFalse())
}
