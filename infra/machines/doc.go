// Package machines is the infra module's seam for the machinepool module
// (and the only infra package other modules may import besides api/; the
// architecture test in test/architecture enforces it).
//
// It holds the one MonolithMachine controller of a manager, which the infra
// module hands to whoever builds the machinepool module (the binary's
// registry), and to which another module registers an Owner adapter for the
// MonolithMachines its objects own. It also exports the lookups and checks
// both modules need: a Cluster's MonolithCluster, the validation of a
// machine's backend and address pools, and the names of address claims.
package machines
