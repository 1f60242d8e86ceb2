package scope_test

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/capi-monolith/capi-monolith/runtimeext/internal/scope"
)

func TestCovers(t *testing.T) {
	cluster := func(ns string, labels map[string]string) *clusterv1.Cluster {
		return &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c", Labels: labels}}
	}
	mine := map[string]string{clusterv1.WatchLabel: "mine"}
	tests := []struct {
		name    string
		scope   scope.Scope
		cluster *clusterv1.Cluster
		want    bool
	}{
		{name: "the zero scope covers every Cluster", cluster: cluster("a", nil), want: true},
		{name: "no Cluster is covered", scope: scope.Scope{Namespace: "a", WatchFilterValue: "mine"}, want: true},
		{name: "the watched namespace is covered", scope: scope.Scope{Namespace: "a"}, cluster: cluster("a", nil), want: true},
		{name: "another namespace is not", scope: scope.Scope{Namespace: "a"}, cluster: cluster("b", nil), want: false},
		{name: "the filter label is covered", scope: scope.Scope{WatchFilterValue: "mine"}, cluster: cluster("b", mine), want: true},
		{name: "no filter label is not", scope: scope.Scope{WatchFilterValue: "mine"}, cluster: cluster("b", nil), want: false},
		{name: "another filter value is not", scope: scope.Scope{WatchFilterValue: "mine"}, cluster: cluster("b", map[string]string{clusterv1.WatchLabel: "theirs"}), want: false},
		{name: "both must hold", scope: scope.Scope{Namespace: "a", WatchFilterValue: "mine"}, cluster: cluster("b", mine), want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			NewWithT(t).Expect(tt.scope.Covers(tt.cluster)).To(Equal(tt.want))
		})
	}
}
