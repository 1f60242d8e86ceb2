// Package store is the in-memory object store of one workload cluster: what
// etcd plus the kube-apiserver's registry are to a real cluster, reduced to
// the semantics clients rely on.
//
// Objects are held as unstructured JSON, keyed by group, resource, namespace
// and name. The store assigns uid, creationTimestamp, generation (bumped
// when anything but metadata and status changes) and one resourceVersion
// sequence for the whole cluster; it checks resourceVersion preconditions
// (409 Conflict), honours finalizers (delete sets deletionTimestamp, the
// object goes with its last finalizer), refuses namespaced objects in a
// missing or terminating namespace, deletes a namespace's content with it,
// filters lists and watches by label and field selectors, pages lists
// (consistently, or 410 Gone when that is no longer possible), and keeps a
// history of changes, bounded by count and by age, so that a watch resumes from a resourceVersion
// or, when that version has left the history, fails with 410 Gone (Expired)
// as kube-apiserver's watch cache does. It collects garbage by
// ownerReferences as kube-controller-manager does (gc.go: background,
// foreground and orphan propagation, asynchronous, on a Collector's
// goroutines shared by every store), and bounds what one cluster may hold
// and ask for (limits.go: object size, objects, bytes, watches, requests
// in flight). Every error is an apierrors StatusError carrying the code a
// kube-apiserver would answer.
//
// Objects handed out by Get and List are copies; objects in watch events are
// shared with the store and must not be modified.
package store
