// Package modules defines what a module of capi-monolith is and how the
// binary picks the enabled ones.
//
// A module is one Cluster API provider (or one part of one) living in its own
// top-level folder: infra, machinepool, ipam, runtimeext. Each exposes a single
// Module value. The binary builds one controller-runtime manager, asks every
// enabled module to register its types in the shared scheme and then to set up
// its controllers, webhooks and runnables on that manager, so that all modules
// share one cache, one client, one webhook server and one leader election.
//
// Modules never import each other; what they share lives in contracts/.
package modules
