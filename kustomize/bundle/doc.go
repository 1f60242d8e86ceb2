// Package bundle builds capi-monolith's clusterctl provider repositories:
// the kustomize overlays of package kustomize and the controller-gen
// manifests of package manifests, both embedded in the binary, are built
// in-process with kustomize/api's krusty, and written as a clusterctl local
// repository (one folder per provider type and version, with
// metadata.yaml, the components file and, for the infrastructure provider,
// the workload cluster templates), an all-in-one file and a clusterctl.yaml
// listing the three providers.
//
// It backs `capi-monolith bundle --version vX.Y.Z --out DIR`. Output is
// deterministic: the same version and options give the same bytes.
package bundle
