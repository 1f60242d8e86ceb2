package v1alpha1

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// InPlaceMachineSpecFields are the fields of a MonolithMachine's spec (JSON
// paths below spec) that change in place, without a new machine: the
// simulated node of the inMemory backend takes new delays as they are. It is
// the one list both sides read: the runtime extension's CanUpdateMachine
// patches these fields only, and the validating webhook lets these fields
// change and keeps every other field of the spec.
var InPlaceMachineSpecFields = [][]string{
	{"backend", "inMemory"},
}

// InPlaceMachineSpecChanges returns the fields of InPlaceMachineSpecFields
// whose value differs between the specs cur and des, as a JSON object below
// spec (nil when none differs): the body of a merge patch's "spec". A field
// only changes in place when both specs have it (a machine never switches
// backend in place).
func InPlaceMachineSpecChanges(cur, des *MonolithMachineSpec) (map[string]any, error) {
	cu, err := runtime.DefaultUnstructuredConverter.ToUnstructured(cur)
	if err != nil {
		return nil, fmt.Errorf("failed to convert the current spec: %w", err)
	}
	du, err := runtime.DefaultUnstructuredConverter.ToUnstructured(des)
	if err != nil {
		return nil, fmt.Errorf("failed to convert the desired spec: %w", err)
	}
	var out map[string]any
	for _, path := range InPlaceMachineSpecFields {
		cv, cok, _ := unstructured.NestedFieldNoCopy(cu, path...)
		dv, dok, _ := unstructured.NestedFieldNoCopy(du, path...)
		if !cok || !dok || equality.Semantic.DeepEqual(cv, dv) {
			continue
		}
		if out == nil {
			out = map[string]any{}
		}
		if err := unstructured.SetNestedField(out, runtime.DeepCopyJSONValue(dv), path...); err != nil {
			return nil, fmt.Errorf("failed to set %v: %w", path, err)
		}
	}
	return out, nil
}

// MachineSpecWithoutInPlaceFields returns spec as a JSON object with the
// fields of InPlaceMachineSpecFields removed; two specs whose results are
// equal differ at most in fields that change in place.
func MachineSpecWithoutInPlaceFields(spec *MonolithMachineSpec) (map[string]any, error) {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(spec)
	if err != nil {
		return nil, fmt.Errorf("failed to convert the spec: %w", err)
	}
	for _, path := range InPlaceMachineSpecFields {
		unstructured.RemoveNestedField(u, path...)
	}
	return u, nil
}
