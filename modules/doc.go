// Package modules defines what a module of capi-monolith is and how the
// binary picks the enabled ones.
//
// A module is one Cluster API provider (or one part of one) living in its own
// top-level folder: infra, machinepool, ipam, runtimeext. Each package exports
// typed Options (with BindFlags and DefaultOptions) and a constructor New that
// returns its Module. The binary's registry (package main, modules.go) holds
// one Entry per module: its name, the modules it requires, and how its options
// bind to flags. The manager asks every enabled module to register its types
// in the shared scheme and then to set up its controllers, webhooks and
// runnables on the one manager (Shared), so that all modules share one cache,
// one client, one webhook server and one leader election. A module that uses
// another is handed what it uses by its constructor (machinepool.New takes
// infra's MonolithMachine controller): the registry builds and sets up the
// modules in its order, a required module registered before the module that
// requires it.
//
// A module imports another module's api/ packages and the exported seams the
// architecture test (test/architecture) allows, nothing else; what every
// module shares lives in contracts/.
package modules
