// Package apiserver serves a workload cluster's Kubernetes API over HTTP from
// its store: discovery, get/list/watch/create/update/patch/delete for the
// kinds Cluster API's controllers and kubectl use, with kube-apiserver's
// semantics (resourceVersion, selectors, watch resume and 410 Gone, merge,
// strategic-merge, JSON and server-side apply patches with managedFields,
// status and eviction subresources) and every error a metav1.Status.
//
// One Handler serves any number of clusters: the caller's StoreFor picks
// the cluster's store for each request (by the TLS server name or the
// listener it came in on). ServeTLS serves a Handler to clients whose
// certificate the cluster's CA signed.
package apiserver
