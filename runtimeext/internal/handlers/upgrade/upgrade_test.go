package upgrade_test

import (
	"context"
	"encoding/json"
	"testing"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"

	"github.com/capi-monolith/capi-monolith/runtimeext/internal/handlers/upgrade"
	"github.com/capi-monolith/capi-monolith/runtimeext/internal/variables"
)

func TestGenerateUpgradePlan(t *testing.T) {
	listed, _ := json.Marshal([]string{"v1.33.1", "v1.33.4", "v1.34.2", "v1.32.9"})
	withVar := clusterv1.Cluster{Spec: clusterv1.ClusterSpec{Topology: clusterv1.Topology{
		ClassRef:  clusterv1.ClusterClassRef{Name: "c"},
		Variables: []clusterv1.ClusterVariable{{Name: variables.UpgradeVersions, Value: apiextensionsv1.JSON{Raw: listed}}},
	}}}
	tests := []struct {
		name     string
		cluster  clusterv1.Cluster
		settings map[string]string
		from, to string
		want     []string
		wantErr  string
	}{
		{name: "a patch upgrade is one step", from: "v1.34.1", to: "v1.34.3", want: []string{"v1.34.3"}},
		{name: "a minor upgrade is one step", from: "v1.34.1", to: "v1.35.0", want: []string{"v1.35.0"}},
		{name: "each skipped minor uses its highest listed patch", cluster: withVar, from: "v1.32.1", to: "v1.35.0", want: []string{"v1.33.4", "v1.34.2", "v1.35.0"}},
		{name: "the setting adds versions", settings: map[string]string{"upgradeVersions": "v1.33.0, v1.34.0"}, from: "v1.32.1", to: "v1.35.0", want: []string{"v1.33.0", "v1.34.0", "v1.35.0"}},
		{name: "a minor nobody lists fails naming it", from: "v1.32.1", to: "v1.34.0", wantErr: "no version of Kubernetes 1.33 is known to upgrade through: list one in the monolithUpgradeVersions variable or the upgradeVersions setting"},
		{name: "a downgrade fails", from: "v1.34.1", to: "v1.33.0", wantErr: "toKubernetesVersion v1.33.0 is not newer than v1.34.1"},
		{name: "garbage fails", from: "latest", to: "v1.33.0", wantErr: `fromControlPlaneKubernetesVersion "latest" is not a semantic version`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			req := &runtimehooksv1.GenerateUpgradePlanRequest{Cluster: tt.cluster, FromControlPlaneKubernetesVersion: tt.from, FromWorkersKubernetesVersion: tt.from, ToKubernetesVersion: tt.to}
			req.Settings = tt.settings
			resp := &runtimehooksv1.GenerateUpgradePlanResponse{}
			(&upgrade.Handlers{}).GenerateUpgradePlan(context.Background(), req, resp)
			if tt.wantErr != "" {
				g.Expect(resp.Status).To(Equal(runtimehooksv1.ResponseStatusFailure))
				g.Expect(resp.Message).To(Equal(tt.wantErr))
				return
			}
			g.Expect(resp.Status).To(Equal(runtimehooksv1.ResponseStatusSuccess), resp.Message)
			var got []string
			for _, s := range resp.ControlPlaneUpgrades {
				got = append(got, s.Version)
			}
			g.Expect(got).To(Equal(tt.want))
			g.Expect(resp.WorkersUpgrades).To(BeEmpty(), "workers are left to Cluster API")
		})
	}
}
