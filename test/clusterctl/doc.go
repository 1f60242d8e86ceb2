// Package clusterctl tests capi-monolith's provider lifecycle with
// clusterctl's own library against real apiservers (envtest): init of the
// three provider types from the bundles, upgrade from an older minor,
// delete leaving nothing of ours behind while Cluster API core keeps
// running, and move of a provisioned cluster of each flavor from one dev
// management cluster to another (the target one a `capi-monolith dev`
// process, built by the test). Cluster API core's components come from the pinned module;
// cert-manager's CRDs stand in for cert-manager, so that clusterctl treats it
// as installed and needs no download.
package clusterctl
