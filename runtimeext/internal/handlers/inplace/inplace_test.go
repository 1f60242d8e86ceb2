package inplace_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"

	infrav1 "github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/runtimeext/internal/handlers/inplace"
)

func machine(b infrav1.MachineBackend) runtime.RawExtension {
	m := &infrav1.MonolithMachine{Spec: infrav1.MonolithMachineSpec{Backend: b}}
	m.SetGroupVersionKind(infrav1.GroupVersion.WithKind("MonolithMachine"))
	raw, _ := json.Marshal(m)
	return runtime.RawExtension{Raw: raw}
}

func inMemory(d time.Duration) infrav1.MachineBackend {
	return infrav1.MachineBackend{InMemory: &infrav1.InMemoryMachineBackend{ProvisioningDelay: &metav1.Duration{Duration: d}}}
}

func TestCanUpdateMachineCoversInMemoryMachinesOnly(t *testing.T) {
	g := NewWithT(t)
	h := &inplace.Handlers{}
	req := &runtimehooksv1.CanUpdateMachineRequest{}
	req.Current.Machine.Spec.Version = "v1.34.0"
	req.Desired.Machine.Spec.Version = "v1.35.0"
	req.Current.InfrastructureMachine = machine(inMemory(time.Second))
	req.Desired.InfrastructureMachine = machine(inMemory(2 * time.Second))
	resp := &runtimehooksv1.CanUpdateMachineResponse{}
	h.CanUpdateMachine(context.Background(), req, resp)
	g.Expect(resp.Status).To(Equal(runtimehooksv1.ResponseStatusSuccess))
	g.Expect(resp.MachinePatch.PatchType).To(Equal(runtimehooksv1.JSONMergePatchType))
	g.Expect(string(resp.MachinePatch.Patch)).To(Equal(`{"spec":{"version":"v1.35.0"}}`))
	g.Expect(string(resp.InfrastructureMachinePatch.Patch)).To(Equal(`{"spec":{"backend":{"inMemory":{"provisioningDelay":"2s"}}}}`))
	g.Expect(resp.BootstrapConfigPatch.IsDefined()).To(BeFalse())

	req.Desired.InfrastructureMachine = machine(infrav1.MachineBackend{Docker: &infrav1.DockerMachineBackend{Image: "x"}})
	resp = &runtimehooksv1.CanUpdateMachineResponse{}
	h.CanUpdateMachine(context.Background(), req, resp)
	g.Expect(resp.Status).To(Equal(runtimehooksv1.ResponseStatusSuccess))
	g.Expect(resp.MachinePatch.IsDefined()).To(BeFalse())
	g.Expect(resp.InfrastructureMachinePatch.IsDefined()).To(BeFalse())
	g.Expect(resp.Message).To(Equal("only inmemory machines are updated in place; docker nodes are replaced"))

	req.Desired.InfrastructureMachine = runtime.RawExtension{Raw: []byte(`{"kind":"DockerMachine"}`)}
	resp = &runtimehooksv1.CanUpdateMachineResponse{}
	h.CanUpdateMachine(context.Background(), req, resp)
	g.Expect(resp.Message).To(Equal("infrastructure object is not a MonolithMachine: cannot update in place"))
}

func TestCanUpdateMachineSetCoversVersionOfInMemoryMachineSets(t *testing.T) {
	g := NewWithT(t)
	tmpl := func(b infrav1.MachineBackend) runtime.RawExtension {
		m := &infrav1.MonolithMachineTemplate{}
		m.SetGroupVersionKind(infrav1.GroupVersion.WithKind("MonolithMachineTemplate"))
		m.Spec.Template.Spec.Backend = b
		raw, _ := json.Marshal(m)
		return runtime.RawExtension{Raw: raw}
	}
	req := &runtimehooksv1.CanUpdateMachineSetRequest{}
	req.Current.MachineSet.Spec.Template.Spec.Version = "v1.34.0"
	req.Desired.MachineSet.Spec.Template.Spec.Version = "v1.35.0"
	req.Current.InfrastructureMachineTemplate = tmpl(inMemory(time.Second))
	req.Desired.InfrastructureMachineTemplate = tmpl(inMemory(time.Second))
	resp := &runtimehooksv1.CanUpdateMachineSetResponse{}
	(&inplace.Handlers{}).CanUpdateMachineSet(context.Background(), req, resp)
	g.Expect(resp.Status).To(Equal(runtimehooksv1.ResponseStatusSuccess))
	g.Expect(string(resp.MachineSetPatch.Patch)).To(Equal(`{"spec":{"template":{"spec":{"version":"v1.35.0"}}}}`))
	g.Expect(resp.InfrastructureMachineTemplatePatch.IsDefined()).To(BeFalse(), "nothing to cover")
}

func TestUpdateMachineCompletesInMemoryMachinesAndRefusesDocker(t *testing.T) {
	g := NewWithT(t)
	h := &inplace.Handlers{}
	req := &runtimehooksv1.UpdateMachineRequest{}
	req.Desired.InfrastructureMachine = machine(inMemory(0))
	resp := &runtimehooksv1.UpdateMachineResponse{}
	h.UpdateMachine(context.Background(), req, resp)
	g.Expect(resp.Status).To(Equal(runtimehooksv1.ResponseStatusSuccess))
	g.Expect(resp.RetryAfterSeconds).To(BeZero())

	req.Desired.InfrastructureMachine = machine(infrav1.MachineBackend{Docker: &infrav1.DockerMachineBackend{}})
	resp = &runtimehooksv1.UpdateMachineResponse{}
	h.UpdateMachine(context.Background(), req, resp)
	g.Expect(resp.Status).To(Equal(runtimehooksv1.ResponseStatusFailure))
	g.Expect(resp.Message).To(Equal("only inmemory machines are updated in place; docker nodes are replaced"))
}

// Only the fields the infra webhook lets change are patched: a change of
// any other field is left out, so Cluster API sees the patch fall short of
// the desired machine and rolls it out instead.
func TestCanUpdateMachinePatchesOnlyTheInPlaceFields(t *testing.T) {
	g := NewWithT(t)
	h := &inplace.Handlers{}
	req := &runtimehooksv1.CanUpdateMachineRequest{}
	req.Current.InfrastructureMachine = machine(inMemory(time.Second))
	group := "ipam.cluster.x-k8s.io"
	des := &infrav1.MonolithMachine{Spec: infrav1.MonolithMachineSpec{Backend: inMemory(time.Second),
		AddressesFromPools: []corev1.TypedLocalObjectReference{{APIGroup: &group, Kind: "MonolithIPPool", Name: "p"}}}}
	des.SetGroupVersionKind(infrav1.GroupVersion.WithKind("MonolithMachine"))
	raw, err := json.Marshal(des)
	g.Expect(err).NotTo(HaveOccurred())
	req.Desired.InfrastructureMachine = runtime.RawExtension{Raw: raw}
	resp := &runtimehooksv1.CanUpdateMachineResponse{}
	h.CanUpdateMachine(context.Background(), req, resp)
	g.Expect(resp.Status).To(Equal(runtimehooksv1.ResponseStatusSuccess))
	g.Expect(resp.InfrastructureMachinePatch.IsDefined()).To(BeFalse())
	g.Expect(infrav1.InPlaceMachineSpecFields).To(Equal([][]string{{"backend", "inMemory"}}),
		"the docs and the webhook message name these fields")
}

func TestCanUpdateMachineSetPatchesTheTemplatesInPlaceFields(t *testing.T) {
	g := NewWithT(t)
	tmpl := func(b infrav1.MachineBackend) runtime.RawExtension {
		m := &infrav1.MonolithMachineTemplate{}
		m.SetGroupVersionKind(infrav1.GroupVersion.WithKind("MonolithMachineTemplate"))
		m.Spec.Template.Spec.Backend = b
		raw, _ := json.Marshal(m)
		return runtime.RawExtension{Raw: raw}
	}
	req := &runtimehooksv1.CanUpdateMachineSetRequest{}
	req.Current.InfrastructureMachineTemplate = tmpl(inMemory(time.Second))
	req.Desired.InfrastructureMachineTemplate = tmpl(inMemory(3 * time.Second))
	resp := &runtimehooksv1.CanUpdateMachineSetResponse{}
	(&inplace.Handlers{}).CanUpdateMachineSet(context.Background(), req, resp)
	g.Expect(resp.Status).To(Equal(runtimehooksv1.ResponseStatusSuccess))
	g.Expect(string(resp.InfrastructureMachineTemplatePatch.Patch)).To(Equal(`{"spec":{"template":{"spec":{"backend":{"inMemory":{"provisioningDelay":"3s"}}}}}}`))
}

// nodeVersions is a management cluster whose Machines have the Nodes of
// nodes, which report versions, or err.
type nodeVersions struct {
	nodes    map[string]string
	versions map[string]string
	err      error
}

func (n *nodeVersions) KubeletVersion(_ context.Context, machine client.ObjectKey) (string, string, error) {
	node := n.nodes[machine.Name]
	return node, n.versions[node], n.err
}

// UpdateMachine is in progress until the machine's Node reports the
// desired kubelet version, and says what it waits for; then it is done.
func TestUpdateMachineIsDoneOnceTheNodeReportsTheDesiredVersion(t *testing.T) {
	g := NewWithT(t)
	nodes := &nodeVersions{nodes: map[string]string{}, versions: map[string]string{"n1": "v1.36.3"}}
	h := &inplace.Handlers{Nodes: nodes}
	req := &runtimehooksv1.UpdateMachineRequest{}
	req.Desired.InfrastructureMachine = machine(inMemory(0))
	req.Desired.Machine.Name = "m1"
	req.Desired.Machine.Spec.Version = "v1.37.0"
	update := func() *runtimehooksv1.UpdateMachineResponse {
		resp := &runtimehooksv1.UpdateMachineResponse{}
		h.UpdateMachine(context.Background(), req, resp)
		g.Expect(resp.Status).To(Equal(runtimehooksv1.ResponseStatusSuccess))
		return resp
	}

	resp := update()
	g.Expect(resp.RetryAfterSeconds).To(BeNumerically(">", 0), "no Node yet: in progress")
	g.Expect(resp.Message).To(Equal("waiting for Machine m1 to have a Node"))

	nodes.nodes["m1"] = "n1"
	resp = update()
	g.Expect(resp.RetryAfterSeconds).To(BeNumerically(">", 0), "the Node reports the old version: in progress")
	g.Expect(resp.Message).To(Equal(`waiting for Node n1 to report kubelet v1.37.0 (it reports "v1.36.3")`))

	nodes.err = errors.New("connection refused")
	resp = update()
	g.Expect(resp.RetryAfterSeconds).To(BeNumerically(">", 0), "an unreadable Node: in progress, never done")
	g.Expect(resp.Message).To(ContainSubstring("connection refused"))

	nodes.err = nil
	nodes.versions["n1"] = "v1.37.0"
	resp = update()
	g.Expect(resp.RetryAfterSeconds).To(BeZero(), "done")
	g.Expect(resp.Message).To(BeEmpty())
}
