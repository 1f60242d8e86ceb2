// Package inplace answers the in-place update hooks (CanUpdateMachine,
// CanUpdateMachineSet, UpdateMachine) honestly for what our backends can
// change without replacing a machine: an inmemory machine is simulated, so
// its Kubernetes version and its simulated delays change in place. Docker
// nodes run a fixed image and are never updated in place: the answer then
// covers nothing and says why, and Cluster API rolls the machine out.
// Bootstrap configuration changes are never covered.
package inplace

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/runtime"

	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"

	infrav1 "github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/runtimeext/internal/record"
)

// Handlers answer the in-place update hooks.
type Handlers struct {
	// Recorder records every call; nil records nothing.
	Recorder *record.Recorder
}

// CanUpdateMachine covers version changes of inmemory machines and changes
// of the spec fields infrav1.InPlaceMachineSpecFields lists (the inmemory
// backend's delays), the fields the MonolithMachine webhook lets change.
func (h *Handlers) CanUpdateMachine(_ context.Context, req *runtimehooksv1.CanUpdateMachineRequest, resp *runtimehooksv1.CanUpdateMachineResponse) {
	start := time.Now()
	defer func() { h.Recorder.Call("CanUpdateMachine", nil, resp, start) }()
	resp.SetStatus(runtimehooksv1.ResponseStatusSuccess)
	cur, err := decode[infrav1.MonolithMachine](req.Current.InfrastructureMachine, "MonolithMachine")
	if err != nil {
		resp.SetMessage(err.Error())
		return
	}
	des, err := decode[infrav1.MonolithMachine](req.Desired.InfrastructureMachine, "MonolithMachine")
	if err != nil {
		resp.SetMessage(err.Error())
		return
	}
	if cur.Spec.Backend.InMemory == nil || des.Spec.Backend.InMemory == nil {
		resp.SetMessage("only inmemory machines are updated in place; docker nodes are replaced")
		return
	}
	// Exactly the fields the infra webhook lets change: one list for both.
	changes, err := infrav1.InPlaceMachineSpecChanges(&cur.Spec, &des.Spec)
	if err != nil {
		resp.SetMessage(err.Error())
		return
	}
	if changes != nil {
		resp.InfrastructureMachinePatch = mergePatch(map[string]any{"spec": changes})
	}
	if req.Current.Machine.Spec.Version != req.Desired.Machine.Spec.Version {
		resp.MachinePatch = mergePatch(map[string]any{"spec": map[string]any{"version": req.Desired.Machine.Spec.Version}})
	}
}

// CanUpdateMachineSet covers version and inmemory backend changes of machine
// sets of inmemory machines.
func (h *Handlers) CanUpdateMachineSet(_ context.Context, req *runtimehooksv1.CanUpdateMachineSetRequest, resp *runtimehooksv1.CanUpdateMachineSetResponse) {
	start := time.Now()
	defer func() { h.Recorder.Call("CanUpdateMachineSet", nil, resp, start) }()
	resp.SetStatus(runtimehooksv1.ResponseStatusSuccess)
	cur, err := decode[infrav1.MonolithMachineTemplate](req.Current.InfrastructureMachineTemplate, "MonolithMachineTemplate")
	if err != nil {
		resp.SetMessage(err.Error())
		return
	}
	des, err := decode[infrav1.MonolithMachineTemplate](req.Desired.InfrastructureMachineTemplate, "MonolithMachineTemplate")
	if err != nil {
		resp.SetMessage(err.Error())
		return
	}
	cb, db := cur.Spec.Template.Spec.Backend.InMemory, des.Spec.Template.Spec.Backend.InMemory
	if cb == nil || db == nil {
		resp.SetMessage("only inmemory machines are updated in place; docker nodes are replaced")
		return
	}
	changes, err := infrav1.InPlaceMachineSpecChanges(&cur.Spec.Template.Spec, &des.Spec.Template.Spec)
	if err != nil {
		resp.SetMessage(err.Error())
		return
	}
	if changes != nil {
		resp.InfrastructureMachineTemplatePatch = mergePatch(map[string]any{"spec": map[string]any{"template": map[string]any{"spec": changes}}})
	}
	if cv, dv := req.Current.MachineSet.Spec.Template.Spec.Version, req.Desired.MachineSet.Spec.Template.Spec.Version; cv != dv {
		resp.MachineSetPatch = mergePatch(map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{"version": dv}}}})
	}
}

// UpdateMachine completes at once for inmemory machines: nothing runs, so the
// simulated node has the desired state as soon as its objects do.
func (h *Handlers) UpdateMachine(_ context.Context, req *runtimehooksv1.UpdateMachineRequest, resp *runtimehooksv1.UpdateMachineResponse) {
	start := time.Now()
	defer func() { h.Recorder.Call("UpdateMachine", nil, resp, start) }()
	des, err := decode[infrav1.MonolithMachine](req.Desired.InfrastructureMachine, "MonolithMachine")
	if err != nil {
		resp.SetStatus(runtimehooksv1.ResponseStatusFailure)
		resp.SetMessage(err.Error())
		return
	}
	if des.Spec.Backend.InMemory == nil {
		resp.SetStatus(runtimehooksv1.ResponseStatusFailure)
		resp.SetMessage("only inmemory machines are updated in place; docker nodes are replaced")
		return
	}
	resp.SetStatus(runtimehooksv1.ResponseStatusSuccess)
	resp.SetRetryAfterSeconds(0)
}

func decode[T any](raw runtime.RawExtension, kind string) (*T, error) {
	var meta struct {
		Kind string `json:"kind"`
	}
	if len(raw.Raw) == 0 {
		return nil, fmt.Errorf("no %s in the request: cannot update in place", kind)
	}
	if err := json.Unmarshal(raw.Raw, &meta); err != nil || meta.Kind != kind {
		return nil, fmt.Errorf("infrastructure object is not a %s: cannot update in place", kind)
	}
	out := new(T)
	if err := json.Unmarshal(raw.Raw, out); err != nil {
		return nil, fmt.Errorf("%s does not decode: cannot update in place", kind)
	}
	return out, nil
}

func mergePatch(v map[string]any) runtimehooksv1.Patch {
	b, _ := json.Marshal(v)
	return runtimehooksv1.Patch{PatchType: runtimehooksv1.JSONMergePatchType, Patch: b}
}
