// Package apiserver serves a workload cluster's Kubernetes API over HTTP from
// its store: discovery (aggregated and per group version), OpenAPI v2 and
// v3 (a source's documents filtered to what is served), and every built-in
// resource of kube-apiserver (the table generated from its discovery, with
// its verbs and subresources) with kube-apiserver's semantics
// (resourceVersion, selectors, pagination, watch resume and 410 Gone,
// merge, strategic-merge, JSON and server-side apply patches with
// managedFields, dry runs, status, scale, binding and eviction
// subresources, access and token reviews answered from the cluster's RBAC
// objects) and every error a metav1.Status.
//
// Each cluster also serves the resources of its own
// CustomResourceDefinitions (crd_*.go): a per-cluster resource set made
// from the CRDs in its store, with apiextensions-apiserver's validation,
// structural pruning and defaulting, versions, status and scale
// subresources, and the CRDs' status and cleanup on deletion.
//
// One Handler serves any number of clusters: Options.StoreFor picks the
// cluster's store for each request. Clusters is such a resolver for one
// listener shared by clusters told apart by the TLS server name, and
// TLSConfig, NewClusterTLS and Serve serve a Handler to clients whose
// certificate the cluster's CA signed.
package apiserver
