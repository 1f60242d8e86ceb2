// Package machines is the infra module's seam for the machinepool module
// (and the only infra package other modules may import besides api/; the
// architecture test in test/architecture enforces it).
//
// It holds the machine services the infra module builds once per manager
// (the backends, the bootstrap task manager; address claims go through the
// one machine controller) and that one MonolithMachine controller, to which
// another module registers an Owner adapter for the MonolithMachines its
// objects own. It also exports the lookups and checks both modules need: a
// Cluster's MonolithCluster, and the validation of a machine's backend and
// address pools.
package machines
