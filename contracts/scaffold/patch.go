package scaffold

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// patchAsSoleWriter writes what changed between before and after with at
// most two merge patches: status first (so that a finalizer removed in the
// same reconcile cannot make it fail), then metadata and spec.
//
// Cluster API's patch helper writes conditions in a request of their own so
// that several controllers can share an object's conditions; for a kind
// whose status only this controller writes that is one request too many on
// every write. JSON merge patches replace lists whole, so this is only for
// such kinds.
func patchAsSoleWriter(ctx context.Context, c client.Client, before, after client.Object) error {
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

	// Each patch replaces the object it is given with the server's answer,
	// which for one endpoint drops the other endpoint's changes: patch
	// copies.
	if statusChanged {
		obj := after.DeepCopyObject().(client.Object)
		if err := c.Status().Patch(ctx, obj, client.MergeFrom(before)); err != nil {
			return fmt.Errorf("failed to patch status: %w", err)
		}
	}
	if restChanged {
		obj := after.DeepCopyObject().(client.Object)
		if err := c.Patch(ctx, obj, client.MergeFrom(before)); err != nil {
			return fmt.Errorf("failed to patch metadata and spec: %w", err)
		}
	}
	return nil
}
