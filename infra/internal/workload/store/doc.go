// Package store is the in-memory object store of one workload cluster: what
// etcd plus the kube-apiserver's registry are to a real cluster, reduced to
// the semantics clients rely on.
//
// Objects are held encoded, as their compact JSON, keyed by group,
// resource, namespace and name, with only what selecting by label and
// resolving owner references read kept decoded beside it (encoded.go): the
// decoded maps took three to four times the memory, and memory per
// cluster is what bounds how many clusters a process serves. An object is
// decoded when it is read (Get, List, a watch's initial or replayed
// events), which is also the copy a caller gets; a write's change reaches
// watchers and observers as the write decoded it.
//
// The store assigns uid, creationTimestamp, generation (bumped when
// anything but metadata and status changes) and one resourceVersion
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
// Objects handed out by Get and List are copies; objects in watch events
// may be shared with other watchers and observers and must not be
// modified.
package store
