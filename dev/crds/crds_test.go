package crds_test

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/capi-monolith/capi-monolith/dev/capimodule"
	"github.com/capi-monolith/capi-monolith/dev/crds"
)

// Core finds the contract of a provider's kind in its CRD's labels, which
// the kubeadm providers' kustomization adds (the CRD files lack them).
func TestClusterAPICRDsGetTheirKustomizationLabels(t *testing.T) {
	g := NewWithT(t)
	m, err := capimodule.Locate()
	g.Expect(err).NotTo(HaveOccurred())
	for _, c := range []capimodule.Component{capimodule.KubeadmBootstrap, capimodule.KubeadmControlPlane} {
		list, err := crds.ReadClusterAPI(m.ComponentCRDDirectory(c))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(list).NotTo(BeEmpty())
		for _, crd := range list {
			g.Expect(crd.Labels).To(HaveKeyWithValue("cluster.x-k8s.io/v1beta2", "v1beta2"), crd.Name)
		}
	}
	core, err := crds.ReadClusterAPI(m.ComponentCRDDirectory(capimodule.Core))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(core).NotTo(BeEmpty(), "core's kustomization adds no labels, and that is fine")
}
