// Package webhooks defaults and validates the infra module's kinds,
// MonolithCluster, MonolithMachine and their templates, before the
// apiserver stores them.
//
// The Defaulter fills in the backend settings of MonolithClusters and
// MonolithClusterTemplates (v1alpha1.DefaultDockerNetwork,
// DefaultDockerLoadBalancerImage, DefaultInMemoryNodeCIDR), so that what is
// stored is what the backends use.
//
// The Validator rejects, as a 422 naming every problem and its field at
// once: a backend that is not exactly one of docker or inMemory, a malformed
// control plane endpoint, Docker network name, node CIDR, failure domain
// list or IP pool reference list; a MonolithMachine whose backend differs
// from its cluster's; and the updates Cluster API does not expect. A
// MonolithCluster keeps its backend kind and, once set, its control plane
// endpoint. A MonolithMachine keeps its spec, except that providerID and
// failureDomain may each be set once and the fields that change in place
// (v1alpha1.InPlaceMachineSpecFields, the ones the runtime extension's
// CanUpdateMachine patches) may change, between valid values. Templates keep their spec, except
// under the server-side-apply dry-runs of Cluster API's topology controller
// (marked by the topology.cluster.x-k8s.io/dry-run annotation), which
// compute diffs and persist nothing.
//
// An update that leaves the spec alone (labels, finalizers, owner
// references) is always allowed, so that an object stored before the
// webhooks ran can still be reconciled, finalized and deleted.
package webhooks
