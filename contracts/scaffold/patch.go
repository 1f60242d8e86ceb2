package scaffold

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// patchAsSoleWriter writes what changed between before and after with at
// most two merge patches: metadata and spec first, then status; for an
// object being deleted status first, so that a finalizer removed in the
// same reconcile cannot make the status patch fail.
//
// Cluster API's patch helper writes conditions in a request of their own so
// that several controllers can share an object's conditions; for a kind
// whose status only this controller writes that is one request too many on
// every write. JSON merge patches replace lists whole, so this is only for
// such kinds.
//
// Spec goes first so that the conditions can carry the generation the spec
// change makes (see carryObservedGeneration): written before it, they would
// name the old generation, and the reconcile the spec change triggers would
// spend one more status patch, and one more reconcile of whatever watches
// the object (Cluster API's Cluster and Machine controllers), on nothing
// but that number.
func patchAsSoleWriter(ctx context.Context, c client.Client, before, after Object) error {
	b, err := runtime.DefaultUnstructuredConverter.ToUnstructured(before)
	if err != nil {
		return fmt.Errorf("failed to convert %T: %w", before, err)
	}
	a, err := runtime.DefaultUnstructuredConverter.ToUnstructured(after)
	if err != nil {
		return fmt.Errorf("failed to convert %T: %w", after, err)
	}
	statusChanged := !equality.Semantic.DeepEqual(b["status"], a["status"])
	delete(b, "status")
	delete(a, "status")
	restChanged := !equality.Semantic.DeepEqual(b, a)
	deleting := !after.GetDeletionTimestamp().IsZero()

	// Each patch replaces the object it is given with the server's answer,
	// which for one endpoint drops the other endpoint's changes: patch
	// copies.
	patchRest := func() (client.Object, error) {
		obj := after.DeepCopyObject().(client.Object)
		if err := c.Patch(ctx, obj, client.MergeFrom(before)); err != nil {
			return nil, fmt.Errorf("failed to patch metadata and spec: %w", err)
		}
		return obj, nil
	}
	if restChanged && !deleting {
		written, err := patchRest()
		if err != nil {
			return err
		}
		if carryObservedGeneration(after, before.GetGeneration(), written.GetGeneration()) {
			statusChanged = true
		}
	}
	if statusChanged {
		obj := after.DeepCopyObject().(client.Object)
		if err := c.Status().Patch(ctx, obj, client.MergeFrom(before)); err != nil {
			return fmt.Errorf("failed to patch status: %w", err)
		}
	}
	if restChanged && deleting {
		if _, err := patchRest(); err != nil {
			return err
		}
	}
	return nil
}

// carryObservedGeneration moves the conditions that observed generation
// from to generation to, when to is the generation this reconcile's own
// spec change made (from + 1): the conditions were computed from that very
// spec. When another writer's change landed too (to > from + 1) they did
// not see it, and keep from. It reports whether it changed any.
func carryObservedGeneration(obj Object, from, to int64) bool {
	if to != from+1 {
		return false
	}
	conds := obj.GetConditions()
	changed := false
	for i := range conds {
		if conds[i].ObservedGeneration == from {
			conds[i].ObservedGeneration = to
			changed = true
		}
	}
	if changed {
		obj.SetConditions(conds)
	}
	return changed
}
