package capie2e

import (
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	capie2e "sigs.k8s.io/cluster-api/test/e2e"
	"sigs.k8s.io/cluster-api/test/framework"
)

// The specs beyond make test's short set: `make test-capi-e2e` runs them all.

var _ = Describe("Cluster API quick start, ipam flavor", func() {
	capie2e.QuickStartSpec(ctx, func() capie2e.QuickStartSpecInput {
		return capie2e.QuickStartSpecInput{
			E2EConfig: e2eConfig, ClusterctlConfigPath: clusterctlConfigPath, BootstrapClusterProxy: bootstrap,
			ArtifactFolder: artifactFolder, SkipCleanup: skipCleanup,
			Flavor: ptr.To("ipam"),
		}
	})
})

// QuickStartSpec passes no wait interval for MachinePools to
// ApplyClusterTemplateAndWait (its MachineDeployment and control-plane
// waits have theirs), so the framework's pool wait falls back on gomega's
// default Eventually timeout of 1 s. As Cluster API's own KCP adoption spec
// does for itself, the default is set here, to the E2EConfig's
// wait-machine-pool-nodes interval, for this container only; the spec's
// assertions are unchanged.
var _ = Describe("Cluster API quick start, machinepool flavor", func() {
	BeforeEach(func() {
		intervals := e2eConfig.GetIntervals("quick-start", "wait-machine-pool-nodes")
		Expect(intervals).To(HaveLen(2), "the E2EConfig's default/wait-machine-pool-nodes")
		SetDefaultEventuallyTimeout(mustDuration(intervals[0]))
		SetDefaultEventuallyPollingInterval(mustDuration(intervals[1]))
		DeferCleanup(func() {
			SetDefaultEventuallyTimeout(gomegaDefaultTimeout)
			SetDefaultEventuallyPollingInterval(gomegaDefaultPolling)
		})
	})
	capie2e.QuickStartSpec(ctx, func() capie2e.QuickStartSpecInput {
		return capie2e.QuickStartSpecInput{
			E2EConfig: e2eConfig, ClusterctlConfigPath: clusterctlConfigPath, BootstrapClusterProxy: bootstrap,
			ArtifactFolder: artifactFolder, SkipCleanup: skipCleanup,
			Flavor: ptr.To("machinepool"),
			PostMachinesProvisioned: func(proxy framework.ClusterProxy, namespace, _ string) {
				expectCAPIResourcesFound(proxy, namespace)
			},
		}
	})
})

var _ = Describe("Cluster API MachineDeployment scale, default flavor", func() {
	capie2e.MachineDeploymentScaleSpec(ctx, func() capie2e.MachineDeploymentScaleSpecInput {
		return capie2e.MachineDeploymentScaleSpecInput{
			E2EConfig: e2eConfig, ClusterctlConfigPath: clusterctlConfigPath, BootstrapClusterProxy: bootstrap,
			ArtifactFolder: artifactFolder, SkipCleanup: skipCleanup,
		}
	})
})

var _ = Describe("Cluster API MachinePool, machinepool flavor", func() {
	capie2e.MachinePoolSpec(ctx, func() capie2e.MachinePoolInput {
		return capie2e.MachinePoolInput{
			E2EConfig: e2eConfig, ClusterctlConfigPath: clusterctlConfigPath, BootstrapClusterProxy: bootstrap,
			ArtifactFolder: artifactFolder, SkipCleanup: skipCleanup,
			Flavor: ptr.To("machinepool"),
		}
	})
})

var _ = Describe("Cluster API cluster upgrade, ClusterClass (topology flavor)", func() {
	capie2e.ClusterUpgradeConformanceSpec(ctx, func() capie2e.ClusterUpgradeConformanceSpecInput {
		return capie2e.ClusterUpgradeConformanceSpecInput{
			E2EConfig: e2eConfig, ClusterctlConfigPath: clusterctlConfigPath, BootstrapClusterProxy: bootstrap,
			ArtifactFolder: artifactFolder, SkipCleanup: skipCleanup,
			SkipConformanceTests: true,
			Flavor:               ptr.To("topology"),
		}
	})
})

// The deletion of a topology cluster, which Cluster API only starts once
// our runtime extension's BeforeClusterDelete hook (registered by dev for
// every namespace) answers, goes in the order Cluster API promises:
// workers, then the control plane, then our MonolithCluster.
var _ = Describe("Cluster API cluster deletion, ClusterClass (topology flavor)", func() {
	capie2e.ClusterDeletionSpec(ctx, func() capie2e.ClusterDeletionSpecInput {
		return capie2e.ClusterDeletionSpecInput{
			E2EConfig: e2eConfig, ClusterctlConfigPath: clusterctlConfigPath, BootstrapClusterProxy: bootstrap,
			ArtifactFolder: artifactFolder, SkipCleanup: skipCleanup,
			ControlPlaneMachineCount: ptr.To[int64](3),
			Flavor:                   ptr.To("topology"),
			PostMachinesProvisioned: func(proxy framework.ClusterProxy, namespace, _ string) {
				expectCAPIResourcesFound(proxy, namespace)
			},
			ClusterDeletionPhases: []capie2e.ClusterDeletionPhase{
				{
					ObjectFilter: func(ref corev1.ObjectReference, owners []metav1.OwnerReference) bool {
						return ref.Kind == "MachineDeployment" || ref.Kind == "MachineSet" ||
							(ref.Kind == "Machine" && ownedBy(owners, "MachineDeployment", "MachineSet"))
					},
					BlockingObjectFilter: kindIs("Machine"),
				},
				{
					ObjectFilter: func(ref corev1.ObjectReference, owners []metav1.OwnerReference) bool {
						return ref.Kind == "KubeadmControlPlane" || (ref.Kind == "Machine" && ownedBy(owners, "KubeadmControlPlane"))
					},
					BlockingObjectFilter: kindIs("Machine"),
				},
				{
					ObjectFilter:         kindIs("MonolithCluster"),
					BlockingObjectFilter: kindIs("MonolithCluster"),
				},
			},
		}
	})
})

// kindIs is an object filter of one kind.
func kindIs(kind string) func(corev1.ObjectReference, []metav1.OwnerReference) bool {
	return func(ref corev1.ObjectReference, _ []metav1.OwnerReference) bool { return ref.Kind == kind }
}

// ownedBy says whether any owner is of one of the kinds.
func ownedBy(owners []metav1.OwnerReference, kinds ...string) bool {
	return slices.ContainsFunc(owners, func(o metav1.OwnerReference) bool { return slices.Contains(kinds, o.Kind) })
}

var _ = Describe("Cluster API MachineDeployment remediation (healthcheck flavor)", func() {
	capie2e.MachineDeploymentRemediationSpec(ctx, func() capie2e.MachineDeploymentRemediationSpecInput {
		return capie2e.MachineDeploymentRemediationSpecInput{
			E2EConfig: e2eConfig, ClusterctlConfigPath: clusterctlConfigPath, BootstrapClusterProxy: bootstrap,
			ArtifactFolder: artifactFolder, SkipCleanup: skipCleanup,
			Flavor: ptr.To("healthcheck"),
		}
	})
})

var _ = Describe("Cluster API ClusterClass changes (topology flavor)", func() {
	capie2e.ClusterClassChangesSpec(ctx, func() capie2e.ClusterClassChangesSpecInput {
		return capie2e.ClusterClassChangesSpecInput{
			E2EConfig: e2eConfig, ClusterctlConfigPath: clusterctlConfigPath, BootstrapClusterProxy: bootstrap,
			ArtifactFolder: artifactFolder, SkipCleanup: skipCleanup,
			Flavor:                   "topology",
			ModifyControlPlaneFields: map[string]any{"spec.kubeadmConfigSpec.verbosity": int64(4)},
			ModifyMachineDeploymentBootstrapConfigTemplateFields: map[string]any{"spec.template.spec.verbosity": int64(4)},
			ModifyMachineDeploymentInfrastructureMachineTemplateFields: map[string]any{
				"spec.template.spec.backend.inMemory.provisioningDelay": "1s",
			},
		}
	})
})

var _ = Describe("Cluster API ClusterClass rollout (topology-taints flavor)", func() {
	capie2e.ClusterClassRolloutSpec(ctx, func() capie2e.ClusterClassRolloutSpecInput {
		return capie2e.ClusterClassRolloutSpecInput{
			E2EConfig: e2eConfig, ClusterctlConfigPath: clusterctlConfigPath, BootstrapClusterProxy: bootstrap,
			ArtifactFolder: artifactFolder, SkipCleanup: skipCleanup,
			Flavor: "topology-taints",
		}
	})
})

// Cluster API's scale spec at a size that fits CI: make bench's workload
// benchmarks measure the large sizes.
var _ = Describe("Cluster API scale (topology flavor, 3 clusters)", func() {
	capie2e.ScaleSpec(ctx, func() capie2e.ScaleSpecInput {
		in := scaleInput()
		in.ClusterCount, in.Concurrency = ptr.To[int64](3), ptr.To[int64](3)
		return in
	})
})

// gomega's own defaults, restored after a container that changed them.
const (
	gomegaDefaultTimeout = time.Second
	gomegaDefaultPolling = 10 * time.Millisecond
)

// mustDuration reads an E2EConfig interval ("5m").
func mustDuration(v any) time.Duration {
	d, err := time.ParseDuration(v.(string))
	Expect(err).NotTo(HaveOccurred(), "interval %v", v)
	return d
}

// scaleInput is ScaleSpec's input for clusters of the workload benchmarks'
// shape, KCP 1 + one MachineDeployment of 3, from the topology flavor; the
// cluster count and concurrency are ScaleSpec's (its environment) unless
// set.
func scaleInput() capie2e.ScaleSpecInput {
	return capie2e.ScaleSpecInput{
		E2EConfig: e2eConfig, ClusterctlConfigPath: clusterctlConfigPath, BootstrapClusterProxy: bootstrap,
		ArtifactFolder: artifactFolder, SkipCleanup: skipCleanup,
		Flavor:                            ptr.To("topology"),
		ClusterClassName:                  "monolith",
		ControlPlaneMachineCount:          ptr.To[int64](1),
		MachineDeploymentCount:            ptr.To[int64](1),
		WorkerPerMachineDeploymentCount:   ptr.To[int64](3),
		AdditionalClusterClassCount:       ptr.To[int64](0),
		DeployClusterInSeparateNamespaces: ptr.To(false),
		UseCrossNamespaceClusterClass:     ptr.To(false),
		FailFast:                          true,
	}
}
