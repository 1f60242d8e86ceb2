package machinepool_test

import (
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/capi-monolith/capi-monolith/contracts/crd"
)

// The fields of seed 001 (the InfraMachinePool contract, v1beta2), at the
// paths Cluster API v1.14 reads them.
var contractPaths = map[string][][]string{
	"MonolithMachinePool": {
		{"spec", "providerID"},
		{"spec", "providerIDList"},
		{"status", "ready"},
		{"status", "initialization", "provisioned"},
		{"status", "replicas"},
		{"status", "infrastructureMachineKind"},
		{"status", "instances", "instanceName"},
		{"status", "instances", "providerID"},
		{"status", "instances", "addresses", "address"},
		{"status", "instances", "version"},
		{"status", "instances", "ready"},
		{"status", "conditions"},
	},
	"MonolithMachinePoolTemplate": {{"spec", "template", "spec"}, {"spec", "template", "metadata", "labels"}},
}

func TestMachinePoolCRDsFollowTheContract(t *testing.T) {
	g := NewWithT(t)
	crds, err := crd.LoadDir(filepath.Join("..", "manifests", "machinepool", "crd"))
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
	// Contract v1beta2 reports terminal failures as conditions; Cluster API
	// v1.14.2 core panics on a MachinePool whose infrastructure has these.
	for _, gone := range []string{"failureReason", "failureMessage"} {
		g.Expect(crd.HasPath(byKind["MonolithMachinePool"], "status", gone)).NotTo(Succeed(), "status.%s", gone)
	}
}
