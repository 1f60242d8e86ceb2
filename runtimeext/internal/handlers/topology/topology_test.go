package topology_test

import (
	"context"
	"encoding/json"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"

	infrav1 "github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	mpv1 "github.com/capi-monolith/capi-monolith/machinepool/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/runtimeext/internal/handlers/topology"
	"github.com/capi-monolith/capi-monolith/runtimeext/internal/variables"
)

func raw(t *testing.T, obj runtime.Object) runtime.RawExtension {
	t.Helper()
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return runtime.RawExtension{Raw: b}
}

func v(name string, val any) runtimehooksv1.Variable {
	b, _ := json.Marshal(val)
	return runtimehooksv1.Variable{Name: name, Value: apiextensionsv1.JSON{Raw: b}}
}

func clusterTemplate() *infrav1.MonolithClusterTemplate {
	t := &infrav1.MonolithClusterTemplate{ObjectMeta: metav1.ObjectMeta{Name: "ct"}}
	t.SetGroupVersionKind(infrav1.GroupVersion.WithKind("MonolithClusterTemplate"))
	t.Spec.Template.Spec.Backend.InMemory = &infrav1.InMemoryClusterBackend{}
	return t
}

func machineTemplate() *infrav1.MonolithMachineTemplate {
	t := &infrav1.MonolithMachineTemplate{ObjectMeta: metav1.ObjectMeta{Name: "mt"}}
	t.SetGroupVersionKind(infrav1.GroupVersion.WithKind("MonolithMachineTemplate"))
	t.Spec.Template.Spec.Backend.InMemory = &infrav1.InMemoryMachineBackend{}
	return t
}

func apply(t *testing.T, g *WithT, original runtime.Object, item runtimehooksv1.GeneratePatchesResponseItem, into runtime.Object) {
	t.Helper()
	g.Expect(item.PatchType).To(Equal(runtimehooksv1.JSONPatchType))
	p, err := jsonpatch.DecodePatch(item.Patch)
	g.Expect(err).NotTo(HaveOccurred())
	out, err := p.Apply(raw(t, original).Raw)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(json.Unmarshal(out, into)).To(Succeed())
}

func TestGeneratePatchesSetsBackendImagesAndPools(t *testing.T) {
	g := NewWithT(t)
	h, err := topology.New(nil)
	g.Expect(err).NotTo(HaveOccurred())
	ct, mt := clusterTemplate(), machineTemplate()
	holder := runtimehooksv1.HolderReference{APIVersion: "cluster.x-k8s.io/v1beta2", Kind: "MachineDeployment", Namespace: "ns", Name: "md", FieldPath: "spec.template.spec.infrastructureRef"}
	req := &runtimehooksv1.GeneratePatchesRequest{
		Variables: []runtimehooksv1.Variable{
			v(variables.Backend, "docker"),
			v(variables.LoadBalancerImage, "lb:1"),
			v(variables.NodeImage, "node:1"),
		},
		Items: []runtimehooksv1.GeneratePatchesRequestItem{
			{UID: "ct", HolderReference: holder, Object: raw(t, ct)},
			{UID: "mt", HolderReference: holder, Object: raw(t, mt), Variables: []runtimehooksv1.Variable{
				v(variables.AddressPools, []variables.PoolRef{{Kind: "MonolithIPPool", Name: "nodes"}}),
			}},
			// Someone else's template is left alone.
			{UID: "other", HolderReference: holder, Object: runtime.RawExtension{Raw: []byte(`{"apiVersion":"x.io/v1","kind":"Other","spec":{}}`)}},
		},
	}
	resp := &runtimehooksv1.GeneratePatchesResponse{}
	h.GeneratePatches(context.Background(), req, resp)
	g.Expect(resp.Status).To(Equal(runtimehooksv1.ResponseStatusSuccess), resp.Message)
	g.Expect(resp.Items).To(HaveLen(2))

	gotCT := &infrav1.MonolithClusterTemplate{}
	apply(t, g, ct, resp.Items[0], gotCT)
	g.Expect(gotCT.Spec.Template.Spec.Backend.InMemory).To(BeNil())
	g.Expect(gotCT.Spec.Template.Spec.Backend.Docker).To(Equal(&infrav1.DockerClusterBackend{LoadBalancerImage: "lb:1"}))

	gotMT := &infrav1.MonolithMachineTemplate{}
	apply(t, g, mt, resp.Items[1], gotMT)
	g.Expect(gotMT.Spec.Template.Spec.Backend.Docker).To(Equal(&infrav1.DockerMachineBackend{Image: "node:1"}))
	g.Expect(gotMT.Spec.Template.Spec.AddressesFromPools).To(HaveExactElements(HaveField("Name", "nodes")))
	g.Expect(ptr.Deref(gotMT.Spec.Template.Spec.AddressesFromPools[0].APIGroup, "")).To(Equal("ipam.cluster.x-k8s.io"))
}

func TestGeneratePatchesDefaultsToInMemoryAndFailsOnBadValues(t *testing.T) {
	g := NewWithT(t)
	h, err := topology.New(nil)
	g.Expect(err).NotTo(HaveOccurred())
	mt := machineTemplate()
	mt.Spec.Template.Spec.Backend = infrav1.MachineBackend{Docker: &infrav1.DockerMachineBackend{}}
	holder := runtimehooksv1.HolderReference{APIVersion: "cluster.x-k8s.io/v1beta2", Kind: "MachineDeployment", Name: "md"}
	resp := &runtimehooksv1.GeneratePatchesResponse{}
	h.GeneratePatches(context.Background(), &runtimehooksv1.GeneratePatchesRequest{
		Items: []runtimehooksv1.GeneratePatchesRequestItem{{UID: "mt", HolderReference: holder, Object: raw(t, mt)}},
	}, resp)
	g.Expect(resp.Status).To(Equal(runtimehooksv1.ResponseStatusSuccess), resp.Message)
	got := &infrav1.MonolithMachineTemplate{}
	apply(t, g, mt, resp.Items[0], got)
	g.Expect(got.Spec.Template.Spec.Backend.InMemory).NotTo(BeNil())
	g.Expect(got.Spec.Template.Spec.Backend.Docker).To(BeNil())

	resp = &runtimehooksv1.GeneratePatchesResponse{}
	h.GeneratePatches(context.Background(), &runtimehooksv1.GeneratePatchesRequest{
		Variables: []runtimehooksv1.Variable{v(variables.Backend, "vmware")},
		Items:     []runtimehooksv1.GeneratePatchesRequestItem{{UID: "mt", HolderReference: holder, Object: raw(t, mt)}},
	}, resp)
	g.Expect(resp.Status).To(Equal(runtimehooksv1.ResponseStatusFailure))
	g.Expect(resp.Message).To(Equal(`variable monolithBackend must be docker or inmemory, got "vmware"`))
}

func TestValidateTopologyReportsEveryInconsistencyInAStableOrder(t *testing.T) {
	g := NewWithT(t)
	h, err := topology.New(nil)
	g.Expect(err).NotTo(HaveOccurred())
	mc := &infrav1.MonolithCluster{}
	mc.SetGroupVersionKind(infrav1.GroupVersion.WithKind("MonolithCluster"))
	mc.Spec.Backend.Docker = &infrav1.DockerClusterBackend{}
	holder := runtimehooksv1.HolderReference{APIVersion: "cluster.x-k8s.io/v1beta2", Kind: "Cluster", Name: "c"}
	req := &runtimehooksv1.ValidateTopologyRequest{
		Variables: []runtimehooksv1.Variable{
			v(variables.Backend, "inmemory"),
			v(variables.NodeImage, "node:1"),
			v(variables.AddressPools, []variables.PoolRef{{Kind: "MonolithIPPool", Name: "a"}, {Kind: "MonolithIPPool", Name: "a"}}),
		},
		Items: []*runtimehooksv1.ValidateTopologyRequestItem{{HolderReference: holder, Object: raw(t, mc)}},
	}
	for range 3 {
		resp := &runtimehooksv1.ValidateTopologyResponse{}
		h.ValidateTopology(context.Background(), req, resp)
		g.Expect(resp.Status).To(Equal(runtimehooksv1.ResponseStatusFailure))
		g.Expect(resp.Message).To(Equal("invalid topology: " +
			"MonolithCluster of Cluster c has backend docker but monolithBackend is inmemory; " +
			"monolithAddressPools: pool MonolithIPPool/a is listed twice; " +
			"monolithNodeImage is set but monolithBackend is inmemory: node images apply to the docker backend only"))
	}

	req.Variables = []runtimehooksv1.Variable{v(variables.Backend, "docker"), v(variables.NodeImage, "node:1")}
	resp := &runtimehooksv1.ValidateTopologyResponse{}
	h.ValidateTopology(context.Background(), req, resp)
	g.Expect(resp.Status).To(Equal(runtimehooksv1.ResponseStatusSuccess), resp.Message)
}

func TestDiscoverVariablesAnswersSchemasWithDefaults(t *testing.T) {
	g := NewWithT(t)
	h, err := topology.New(nil)
	g.Expect(err).NotTo(HaveOccurred())
	resp := &runtimehooksv1.DiscoverVariablesResponse{}
	h.DiscoverVariables(context.Background(), &runtimehooksv1.DiscoverVariablesRequest{}, resp)
	g.Expect(resp.Status).To(Equal(runtimehooksv1.ResponseStatusSuccess))
	names := []string{}
	for _, v := range resp.Variables {
		names = append(names, v.Name)
		g.Expect(v.Schema.OpenAPIV3Schema.Type).NotTo(BeEmpty())
	}
	g.Expect(names).To(Equal([]string{variables.Backend, variables.NodeImage, variables.LoadBalancerImage, variables.AddressPools, variables.UpgradeVersions}))
	g.Expect(string(resp.Variables[0].Schema.OpenAPIV3Schema.Default.Raw)).To(Equal(`"inmemory"`))
}

func TestGeneratePatchesPatchesMachinePoolTemplates(t *testing.T) {
	g := NewWithT(t)
	h, err := topology.New(nil)
	g.Expect(err).NotTo(HaveOccurred())
	mp := &mpv1.MonolithMachinePoolTemplate{ObjectMeta: metav1.ObjectMeta{Name: "mp"}}
	mp.SetGroupVersionKind(mpv1.GroupVersion.WithKind("MonolithMachinePoolTemplate"))
	mp.Spec.Template.Spec.Template.Backend.InMemory = &infrav1.InMemoryMachineBackend{}
	holder := runtimehooksv1.HolderReference{APIVersion: "cluster.x-k8s.io/v1beta2", Kind: "MachinePool", Name: "mp"}
	resp := &runtimehooksv1.GeneratePatchesResponse{}
	h.GeneratePatches(context.Background(), &runtimehooksv1.GeneratePatchesRequest{
		Variables: []runtimehooksv1.Variable{v(variables.Backend, "docker"), v(variables.NodeImage, "node:2"),
			v(variables.AddressPools, []variables.PoolRef{{Kind: "GlobalMonolithIPPool", Name: "g"}})},
		Items: []runtimehooksv1.GeneratePatchesRequestItem{{UID: "mp", HolderReference: holder, Object: raw(t, mp)}},
	}, resp)
	g.Expect(resp.Status).To(Equal(runtimehooksv1.ResponseStatusSuccess), resp.Message)
	got := &mpv1.MonolithMachinePoolTemplate{}
	apply(t, g, mp, resp.Items[0], got)
	g.Expect(got.Spec.Template.Spec.Template.Backend.Docker).To(Equal(&infrav1.DockerMachineBackend{Image: "node:2"}))
	g.Expect(got.Spec.Template.Spec.Template.AddressesFromPools).To(HaveExactElements(HaveField("Kind", "GlobalMonolithIPPool")))
}
