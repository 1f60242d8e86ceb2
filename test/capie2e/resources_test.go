package capie2e

import (
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gstruct"

	"sigs.k8s.io/cluster-api/test/framework"
)

// expectCAPIResourcesFound asserts that the framework's inventory-based
// discovery (the types of the CRDs that carry clusterctl's label, which the
// deletion spec checks and every resource dump lists) finds the cluster's
// objects of each provider: Cluster API core's, kubeadm's and ours. Without
// the labels `clusterctl init` puts on CRDs it would find none, and those
// steps would pass on nothing.
func expectCAPIResourcesFound(proxy framework.ClusterProxy, namespace string) {
	objs := framework.GetCAPIResources(ctx, framework.GetCAPIResourcesInput{Lister: proxy.GetClient(), Namespace: namespace})
	kinds := map[string]int{}
	for _, o := range objs {
		kinds[o.GetKind()]++
	}
	Expect(kinds).To(gstruct.MatchKeys(gstruct.IgnoreExtras, gstruct.Keys{
		"Cluster":                 BeNumerically(">=", 1),
		"Machine":                 BeNumerically(">=", 1),
		"KubeadmControlPlane":     BeNumerically(">=", 1),
		"KubeadmConfig":           BeNumerically(">=", 1),
		"MonolithCluster":         BeNumerically(">=", 1),
		"MonolithMachine":         BeNumerically(">=", 1),
		"MonolithMachineTemplate": BeNumerically(">=", 1),
	}), "kinds the framework found in %s: %v", namespace, kinds)
}
