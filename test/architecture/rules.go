package architecture

// HouseRules are capi-monolith's import rules (the README's Layout
// section explains them): a module imports another module's api/ packages and the
// exported seams listed here, nothing else; the shared areas import no
// module; only the binary (package main), dev (its subcommand) and test/
// wire modules together.
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
	},
}
