package capie2e

import (
	. "github.com/onsi/ginkgo/v2"
	"k8s.io/utils/ptr"

	capie2e "sigs.k8s.io/cluster-api/test/e2e"
	"sigs.k8s.io/cluster-api/test/framework"
)

// Labels pick the sets: `short` is what `make test` runs, everything runs
// in `make test-capi-e2e`.
const short = "short"

var _ = Describe("Cluster API quick start, default flavor", Label(short), func() {
	capie2e.QuickStartSpec(ctx, func() capie2e.QuickStartSpecInput {
		return capie2e.QuickStartSpecInput{
			E2EConfig:             e2eConfig,
			ClusterctlConfigPath:  clusterctlConfigPath,
			BootstrapClusterProxy: bootstrap,
			ArtifactFolder:        artifactFolder,
			SkipCleanup:           skipCleanup,
			PostMachinesProvisioned: func(proxy framework.ClusterProxy, namespace, _ string) {
				expectCAPIResourcesFound(proxy, namespace)
			},
		}
	})
})

var _ = Describe("Cluster API quick start, ClusterClass (topology flavor)", func() {
	capie2e.QuickStartSpec(ctx, func() capie2e.QuickStartSpecInput {
		return capie2e.QuickStartSpecInput{
			E2EConfig:             e2eConfig,
			ClusterctlConfigPath:  clusterctlConfigPath,
			BootstrapClusterProxy: bootstrap,
			ArtifactFolder:        artifactFolder,
			SkipCleanup:           skipCleanup,
			Flavor:                ptr.To("topology"),
		}
	})
})

var _ = Describe("Cluster API KCP and MachineDeployment rollout (taints flavor)", Label(short), func() {
	capie2e.KCPAndMachineDeploymentRolloutSpec(ctx, func() capie2e.KCPAndMachineDeploymentRolloutSpecInput {
		return capie2e.KCPAndMachineDeploymentRolloutSpecInput{
			E2EConfig:             e2eConfig,
			ClusterctlConfigPath:  clusterctlConfigPath,
			BootstrapClusterProxy: bootstrap,
			ArtifactFolder:        artifactFolder,
			SkipCleanup:           skipCleanup,
			Flavor:                "taints",
		}
	})
})

var _ = Describe("Cluster API cluster upgrade, default flavor", Label(short), func() {
	capie2e.ClusterUpgradeConformanceSpec(ctx, func() capie2e.ClusterUpgradeConformanceSpecInput {
		return capie2e.ClusterUpgradeConformanceSpecInput{
			E2EConfig:             e2eConfig,
			ClusterctlConfigPath:  clusterctlConfigPath,
			BootstrapClusterProxy: bootstrap,
			ArtifactFolder:        artifactFolder,
			SkipCleanup:           skipCleanup,
			// Kubernetes' conformance suite needs real kubelets and images.
			SkipConformanceTests: true,
			Flavor:               ptr.To(""),
		}
	})
})
