// Package api holds the names users of the runtime extension write: the
// annotation that holds lifecycle hooks on a Cluster and the namespace label
// that opts a namespace's Clusters in. The runtimeext module has no kinds of
// its own; these are its whole API, importable by other modules and tests.
package api
