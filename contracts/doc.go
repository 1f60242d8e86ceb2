// Package contracts is the room for the Cluster API contract plumbing that
// every module shares, written once:
//
//   - watch: which events reach a reconciler (the watch-filter label, pause
//     transitions of the owning Cluster) and how a Cluster maps to the
//     objects that belong to it;
//   - scaffold: the reconcile scaffold (get, owner Cluster, pause and the
//     Paused condition, finalizer, patch helper with a deferred patch, then
//     the module's normal or delete phases);
//   - crd: conformance checks of our CRDs against what Cluster API reads.
//
// The packages wrap Cluster API's own util packages (predicates, paused,
// finalizers, patch, contract) rather than re-implementing them.
package contracts
