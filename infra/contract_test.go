package infra_test

import (
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/capi-monolith/capi-monolith/contracts/crd"
)

// The fields Cluster API v1.14 reads from infrastructure clusters and
// machines under contract v1beta2 (its internal/contract package), at the
// paths it reads them.
var contractPaths = map[string][][]string{
	"MonolithCluster": {
		{"spec", "controlPlaneEndpoint", "host"},
		{"spec", "controlPlaneEndpoint", "port"},
		{"status", "initialization", "provisioned"},
		{"status", "failureDomains", "name"},
		{"status", "failureDomains", "controlPlane"},
		{"status", "failureDomains", "attributes"},
		{"status", "conditions"},
	},
	"MonolithMachine": {
		{"spec", "providerID"},
		{"spec", "failureDomain"},
		{"status", "failureDomain"},
		{"status", "initialization", "provisioned"},
		{"status", "addresses", "type"},
		{"status", "addresses", "address"},
		{"status", "conditions"},
	},
	"MonolithClusterTemplate": {{"spec", "template", "spec"}, {"spec", "template", "metadata", "labels"}},
	"MonolithMachineTemplate": {{"spec", "template", "spec"}, {"spec", "template", "metadata", "annotations"}},
}

func TestInfraCRDsFollowTheContract(t *testing.T) {
	g := NewWithT(t)
	crds, err := crd.LoadDir(filepath.Join("..", "manifests", "infra", "crd"))
	g.Expect(err).NotTo(HaveOccurred())
	byKind := map[string]*apiextensionsv1.CustomResourceDefinition{}
	for _, c := range crds {
		byKind[c.Spec.Names.Kind] = c
	}
	g.Expect(byKind).To(HaveLen(len(contractPaths)))
	for kind, paths := range contractPaths {
		c := byKind[kind]
		g.Expect(c).NotTo(BeNil(), kind)
		opts := []crd.Option{crd.InCategory("cluster-api")}
		if strings.HasSuffix(kind, "Template") {
			opts = append(opts, crd.Template())
		}
		g.Expect(crd.Check(c, opts...)).To(Succeed(), kind)
		for _, p := range paths {
			g.Expect(crd.HasPath(c, p...)).To(Succeed(), kind)
		}
	}
}
