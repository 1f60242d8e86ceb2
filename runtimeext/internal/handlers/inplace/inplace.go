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
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"

	infrav1 "github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/runtimeext/internal/record"
)

// Handlers answer the in-place update hooks.
type Handlers struct {
	// Recorder records every call; nil records nothing.
	Recorder *record.Recorder
	// Nodes reads the kubelet version a machine's Node reports, which
	// UpdateMachine waits for. Nil answers done at once (unit tests of
	// the other hooks).
	Nodes NodeVersions
}

// NodeVersions reads which Node a Machine has and the kubelet version it
// reports (package workloadnodes); node is "" while the Machine has none.
// The hook's request carries no status, so the Machine is read.
type NodeVersions interface {
	KubeletVersion(ctx context.Context, machine client.ObjectKey) (node, version string, err error)
}

// updateRetrySeconds is how soon Cluster API asks again while a machine's
// update is in progress: an inmemory Node follows its Machine within a
// reconcile.
const updateRetrySeconds = 1

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

// UpdateMachine reports an inmemory machine's update done once its Node
// reports the desired kubelet version, as an extension that upgrades a
// real node answers only once the kubelet runs the new version: the
// infra controller makes the inmemory Node follow its Machine, and until
// it has, the answer is "in progress" with a message saying what is
// awaited. A Node that cannot be read yet is in progress too: the update
// has not landed, and Cluster API asks again.
func (h *Handlers) UpdateMachine(ctx context.Context, req *runtimehooksv1.UpdateMachineRequest, resp *runtimehooksv1.UpdateMachineResponse) {
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
	if waiting := h.awaited(ctx, &req.Desired.Machine); waiting != "" {
		resp.SetMessage(waiting)
		resp.SetRetryAfterSeconds(updateRetrySeconds)
		return
	}
	resp.SetRetryAfterSeconds(0)
}

// awaited says what machine's update still waits for, or "" when its Node
// runs the desired version.
func (h *Handlers) awaited(ctx context.Context, machine *clusterv1.Machine) string {
	if h.Nodes == nil || machine.Spec.Version == "" {
		return ""
	}
	node, got, err := h.Nodes.KubeletVersion(ctx, client.ObjectKeyFromObject(machine))
	switch {
	case err != nil:
		return fmt.Sprintf("waiting for Machine %s's Node to report kubelet %s: %v", machine.Name, machine.Spec.Version, err)
	case node == "":
		return fmt.Sprintf("waiting for Machine %s to have a Node", machine.Name)
	}
	if normalize(got) != normalize(machine.Spec.Version) {
		return fmt.Sprintf("waiting for Node %s to report kubelet %s (it reports %q)", node, machine.Spec.Version, got)
	}
	return ""
}

// normalize drops the optional "v" of a Kubernetes version.
func normalize(v string) string { return strings.TrimPrefix(v, "v") }

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
