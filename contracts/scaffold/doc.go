// Package scaffold is the reconcile scaffold every module's reconcilers are
// built on, so that none of them writes the Cluster API contract steps again:
//
//	get the object (gone: done)
//	→ find its Cluster (infra objects wait for the owner reference)
//	→ pause: Cluster.spec.paused or the cluster.x-k8s.io/paused annotation
//	  stops here and sets the v1beta2 Paused condition (Cluster API's
//	  paused helper); Paused=False is written with the reconcile's patch
//	→ add the finalizer (and return: the patch triggers the next reconcile)
//	→ patch helper, with a deferred status update and patch
//	→ the module's normal or delete phase; a delete phase that finishes lets
//	  the scaffold remove the finalizer.
//
// A module implements Phases for its kind and builds a Reconciler with New.
// A kind whose phases record their results on the scope (ScopeWith's
// Results), for UpdateStatus to derive every condition and status field in
// one place, implements PhasesWith with its own results type instead.
package scaffold
