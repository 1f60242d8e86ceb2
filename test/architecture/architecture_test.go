package architecture_test

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/capi-monolith/capi-monolith/test/architecture"
)

// The project's own import graph has no arrow the house rules do not allow.
func TestTheImportGraphKeepsTheHouseRules(t *testing.T) {
	g := NewWithT(t)
	graph, err := architecture.Load("../..")
	g.Expect(err).NotTo(HaveOccurred())
	// The graph is the real one: the seam arrow the rules allow is in it.
	g.Expect(graph).To(HaveKeyWithValue("machinepool", ContainElement("infra/machines")))
	g.Expect(graph).To(HaveKey("infra/internal/reconcilers/machine"))
	g.Expect(graph).To(HaveKey("runtimeext/internal/handlers/lifecycle"))
	g.Expect(architecture.Check(graph, architecture.HouseRules)).To(BeEmpty())
}

// Check fails on each kind of forbidden arrow, shown on a synthetic graph.
func TestCheckReportsForbiddenImports(t *testing.T) {
	graph := architecture.Graph{
		"main":                                   {"infra", "machinepool", "ipam", "runtimeext", "manager"},
		"machinepool":                            {"infra/machines", "infra/api/v1alpha1", "machinepool/internal/instances"},
		"machinepool/internal/reconcilers/pool":  {"infra/api/v1alpha1", "infra/machines", "contracts/scaffold"},
		"runtimeext/internal/handlers/lifecycle": {"ipam/api/v1alpha1"},
		"test/managertest":                       {"infra", "ipam"},
		"dev":                                    {"runtimeext", "manager"},
		"infra/internal/reconcilers/machine":     {"contracts/scaffold", "infra/api/v1alpha1"},
		"ipam/internal/something":                {"ipam/api/v1alpha1"},
		"contracts/scaffold":                     {},
	}
	tests := []struct {
		name       string
		from, to   string
		violations []string
	}{
		{name: "the allowed graph passes"},
		{name: "a module importing another module's internals", from: "machinepool/internal/reconcilers/pool", to: "infra/internal/backend",
			violations: []string{"machinepool/internal/reconcilers/pool imports infra/internal/backend"}},
		{name: "a module importing another module's root", from: "machinepool", to: "infra",
			violations: []string{"machinepool imports infra"}},
		{name: "infra importing machinepool's api (no arrow that way)", from: "infra/internal/reconcilers/machine", to: "machinepool/api/v1alpha1",
			violations: []string{"infra/internal/reconcilers/machine imports machinepool/api/v1alpha1"}},
		{name: "runtimeext importing a seam it was not given", from: "runtimeext/internal/handlers/lifecycle", to: "infra/machines",
			violations: []string{"runtimeext/internal/handlers/lifecycle imports infra/machines"}},
		{name: "a shared area importing a module", from: "contracts/scaffold", to: "infra/api/v1alpha1",
			violations: []string{"contracts/scaffold imports infra/api/v1alpha1"}},
		{name: "dev importing a module beyond its arrow", from: "dev", to: "ipam",
			violations: []string{"dev imports ipam"}},
		{name: "the binary and test/ wire modules freely", from: "test/managertest", to: "machinepool"},
		{name: "a shared area importing a shared area without an arrow", from: "contracts/scaffold", to: "manager",
			violations: []string{"contracts/scaffold imports manager"}},
		{name: "the manager importing the module interface", from: "manager", to: "modules"},
		{name: "a module importing a shared area other than contracts and modules", from: "infra/internal/reconcilers/machine", to: "manager",
			violations: []string{"infra/internal/reconcilers/machine imports manager"}},
		{name: "a reconciler importing its module's backend and api", from: "infra/internal/reconcilers/machine", to: "infra/internal/backend"},
		{name: "a backend importing a reconciler (never back)", from: "infra/internal/backend/docker", to: "infra/internal/reconcilers/machine",
			violations: []string{"infra/internal/backend/docker imports infra/internal/reconcilers/machine"}},
		{name: "an api package importing its module's internals", from: "infra/api/v1alpha1", to: "infra/internal/backend",
			violations: []string{"infra/api/v1alpha1 imports infra/internal/backend"}},
		{name: "an internal package importing its module's root", from: "ipam/internal/something", to: "ipam",
			violations: []string{"ipam/internal/something imports ipam"}},
		{name: "the seam importing its module's reconciler", from: "infra/machines", to: "infra/internal/reconcilers/machine"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			gr := architecture.Graph{}
			for k, v := range graph {
				gr[k] = append([]string(nil), v...)
			}
			if tt.from != "" {
				gr[tt.from] = append(gr[tt.from], tt.to)
			}
			var got []string
			for _, v := range architecture.Check(gr, architecture.HouseRules) {
				got = append(got, v.String())
			}
			g.Expect(got).To(Equal(tt.violations))
		})
	}
}
