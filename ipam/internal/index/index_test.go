package index_test

import (
	"testing"

	. "github.com/onsi/gomega"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/capi-monolith/capi-monolith/ipam/internal/index"
)

func TestKeyOfRef(t *testing.T) {
	tests := []struct {
		name   string
		ref    ipamv1.IPPoolReference
		want   index.PoolKey
		isOurs bool
	}{
		{name: "a namespaced pool takes the claim's namespace", ref: ipamv1.IPPoolReference{APIGroup: "ipam.cluster.x-k8s.io", Kind: "MonolithIPPool", Name: "p"},
			want: index.PoolKey{Kind: "MonolithIPPool", Namespace: "ns", Name: "p"}, isOurs: true},
		{name: "a global pool has no namespace", ref: ipamv1.IPPoolReference{APIGroup: "ipam.cluster.x-k8s.io", Kind: "GlobalMonolithIPPool", Name: "p"},
			want: index.PoolKey{Kind: "GlobalMonolithIPPool", Name: "p"}, isOurs: true},
		{name: "an empty apiGroup (converted from v1beta1) is not ours", ref: ipamv1.IPPoolReference{Kind: "MonolithIPPool", Name: "p"}},
		{name: "another group is not ours", ref: ipamv1.IPPoolReference{APIGroup: "ipam.example.com", Kind: "MonolithIPPool", Name: "p"}},
		{name: "another kind of our group is not ours", ref: ipamv1.IPPoolReference{APIGroup: "ipam.cluster.x-k8s.io", Kind: "InClusterIPPool", Name: "p"}},
		{name: "a reference without a name is not ours", ref: ipamv1.IPPoolReference{APIGroup: "ipam.cluster.x-k8s.io", Kind: "MonolithIPPool"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got, ok := index.KeyOfRef(tt.ref, "ns")
			g.Expect(ok).To(Equal(tt.isOurs))
			g.Expect(got).To(Equal(tt.want))
		})
	}
}
