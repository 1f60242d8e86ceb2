package architecture

// HouseRules are capi-monolith's import rules (docs/dev.md's Layout
// section explains them): a module imports another module's api/ packages
// and the exported seams listed here, of the shared areas only contracts/
// and modules/, nothing else; the shared areas import no module and only the
// shared areas named here; inside a module the api is imported by the
// internal packages and the reconcilers import the backends, never the other
// way; only the binary (package main), dev (its subcommand) and test/ wire
// modules together.
var HouseRules = Rules{
	Modules: []string{"infra", "machinepool", "ipam", "runtimeext"},
	Closed:  []string{"contracts", "modules", "manager", "kustomize", "hack", "manifests", "dev"},
	Allowed: []Edge{
		{From: "machinepool", To: "infra/api/...",
			Why: "pool instances are MonolithMachines of MonolithClusters; the pool template embeds MachineBackend"},
		{From: "machinepool", To: "infra/machines",
			Why: "the seam: the one MonolithMachine controller (handed to machinepool.New) with owner-adapter registration, MonolithCluster lookup, machine validation"},
		{From: "runtimeext", To: "ipam/api/...",
			Why: "the IP capacity gate and the topology variables read the pool kinds"},
		{From: "runtimeext", To: "infra/api/...",
			Why: "topology mutation patches the infra template kinds; in-place updates read MonolithMachines"},
		{From: "runtimeext", To: "machinepool/api/...",
			Why: "topology mutation patches MonolithMachinePoolTemplates"},
		{From: "dev", To: "runtimeext",
			Why: "dev registers the extension itself and turns the module's registration off"},

		{From: EveryModule, To: "contracts/...",
			Why: "the Cluster API contract plumbing every module shares"},
		{From: EveryModule, To: "modules",
			Why: "the Module interface a module implements"},
		{From: "manager", To: "modules",
			Why: "the manager sets up the modules it is given"},
		{From: "dev", To: "manager",
			Why: "dev runs the binary's one manager in-process"},
		{From: "dev", To: "modules",
			Why: "dev runs the modules it is given, from the binary's registry"},
		{From: "dev", To: "manifests",
			Why: "dev installs our CRDs and webhook configurations"},
		{From: "dev", To: "kustomize/bundle",
			Why: "dev records our providers in clusterctl's inventory as the bundles name them"},
		{From: "kustomize", To: "manifests",
			Why: "the bundles are built from the generated manifests"},
	},
	Layers: []Layer{
		{Name: "api", Packages: []string{"api/..."},
			Why: "the kinds and names others read; they import no package of their module outside api/"},
		{Name: "internal", Packages: []string{"internal/..."},
			Why: "what the reconcilers drive: backends, the workload API, allocators, indexes, tasks"},
		{Name: "reconcilers", Packages: []string{"internal/reconcilers/...", "internal/webhooks/...", "internal/handlers/..."},
			Why: "controllers, webhooks and hook handlers, on top of the internal packages"},
		{Name: "exported", Packages: []string{".", "machines"},
			Why: "the module value and the seams others may use, which wire the rest"},
	},
}
