package capie2e

import (
	. "github.com/onsi/ginkgo/v2"
	"k8s.io/utils/ptr"

	capie2e "sigs.k8s.io/cluster-api/test/e2e"
	"sigs.k8s.io/cluster-api/test/framework"
)

// Labels pick the sets: `short` is what `make test` runs, everything but
// `bench` (benchLabel) runs in `make test-capi-e2e`.
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

// Cluster API's upgrade spec as Cluster API's own e2e configuration runs it
// (test/e2e/config/docker.yaml of v1.14.2): KubeadmControlPlane upgrades
// etcd and CoreDNS with Kubernetes, and the spec waits for the etcd Pods'
// new image and for the CoreDNS Deployment's updated, available replicas,
// which the workload API's controllers roll out.
var _ = Describe("Cluster API cluster upgrade with etcd and CoreDNS, default flavor", Label(short), func() {
	capie2e.ClusterUpgradeConformanceSpec(ctx, func() capie2e.ClusterUpgradeConformanceSpecInput {
		config := e2eConfig.DeepCopy()
		config.Variables[capie2e.EtcdVersionUpgradeTo] = "3.7.0-0"
		config.Variables[capie2e.CoreDNSVersionUpgradeTo] = "v1.14.6"
		return capie2e.ClusterUpgradeConformanceSpecInput{
			E2EConfig:             config,
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
