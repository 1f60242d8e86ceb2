// Package topology answers the topology mutation hooks for ClusterClasses
// built from our template kinds: DiscoverVariables (the variables of package
// variables), GeneratePatches (sets the backend, images and IP pools of
// MonolithClusterTemplate, MonolithMachineTemplate and
// MonolithMachinePoolTemplate, using Cluster API's topologymutation walker)
// and ValidateTopology (rejects inconsistent values with a message naming
// them).
package topology
