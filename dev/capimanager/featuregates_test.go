package capimanager

import (
	"testing"

	. "github.com/onsi/gomega"
)

func TestFeatureGates(t *testing.T) {
	tests := []struct {
		name    string
		extra   map[string]bool
		want    string
		wantErr string
	}{
		{name: "the defaults, sorted", want: "ClusterTopology=true,KubeadmBootstrapFormatIgnition=true,MachinePool=true,MachineTaintPropagation=true,RuntimeSDK=true"},
		{name: "a gate added", extra: map[string]bool{"InPlaceUpdates": true},
			want: "ClusterTopology=true,InPlaceUpdates=true,KubeadmBootstrapFormatIgnition=true,MachinePool=true,MachineTaintPropagation=true,RuntimeSDK=true"},
		{name: "a default turned off", extra: map[string]bool{"MachineTaintPropagation": false},
			want: "ClusterTopology=true,KubeadmBootstrapFormatIgnition=true,MachinePool=true,MachineTaintPropagation=false,RuntimeSDK=true"},
		{name: "an unknown gate names the known ones", extra: map[string]bool{"InPlaceUpdate": true},
			wantErr: `unknown Cluster API feature gate "InPlaceUpdate": Cluster API's managers know AllAlpha, AllBeta, ClusterTopology, InPlaceUpdates,`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := FeatureGates(tt.extra)
			if tt.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tt.want))
		})
	}
}
