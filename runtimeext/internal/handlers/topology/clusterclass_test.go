package topology_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"

	"github.com/capi-monolith/capi-monolith/runtimeext/internal/handlers/topology"
	"github.com/capi-monolith/capi-monolith/runtimeext/internal/variables"
)

// holders are the topology objects the shipped ClusterClass's templates
// are patched for, by template kind, as the topology controller sends
// them.
var holders = map[string]runtimehooksv1.HolderReference{
	"MonolithClusterTemplate":     {APIVersion: "cluster.x-k8s.io/v1beta2", Kind: "Cluster", Name: "c", FieldPath: "spec.infrastructureRef"},
	"KubeadmControlPlaneTemplate": {APIVersion: "cluster.x-k8s.io/v1beta2", Kind: "Cluster", Name: "c", FieldPath: "spec.controlPlaneRef"},
	"MonolithMachineTemplate":     {APIVersion: "cluster.x-k8s.io/v1beta2", Kind: "MachineDeployment", Name: "md", FieldPath: "spec.template.spec.infrastructureRef"},
	"KubeadmConfigTemplate":       {APIVersion: "cluster.x-k8s.io/v1beta2", Kind: "MachineDeployment", Name: "md", FieldPath: "spec.template.spec.bootstrap.configRef"},
	"MonolithMachinePoolTemplate": {APIVersion: "cluster.x-k8s.io/v1beta2", Kind: "MachinePool", Name: "mp", FieldPath: "spec.template.spec.infrastructureRef"},
}

// TestGeneratePatchesAppliesToTheShippedClusterClass: every template of
// kustomize/templates/clusterclass-monolith.yaml (kubeadm's control plane
// and bootstrap templates, our cluster, machine and machine pool
// templates) goes through GeneratePatches with the docker backend and a
// pool; our templates get patches that apply to them, kubeadm's none.
func TestGeneratePatchesAppliesToTheShippedClusterClass(t *testing.T) {
	g := NewWithT(t)
	h, err := topology.New(nil)
	g.Expect(err).NotTo(HaveOccurred())

	templates := classTemplates(t)
	req := &runtimehooksv1.GeneratePatchesRequest{Variables: []runtimehooksv1.Variable{
		v(variables.Backend, "docker"), v(variables.NodeImage, "node:2"),
		v(variables.AddressPools, []variables.PoolRef{{Kind: "MonolithIPPool", Name: "nodes"}}),
	}}
	kinds := map[types.UID]string{}
	for _, tmpl := range templates {
		holder, ok := holders[tmpl.GetKind()]
		g.Expect(ok).To(BeTrue(), "a template of kind %s in the class", tmpl.GetKind())
		b, err := tmpl.MarshalJSON()
		g.Expect(err).NotTo(HaveOccurred())
		uid := types.UID(tmpl.GetKind() + "/" + tmpl.GetName())
		kinds[uid] = tmpl.GetKind()
		req.Items = append(req.Items, runtimehooksv1.GeneratePatchesRequestItem{UID: uid, HolderReference: holder, Object: runtime.RawExtension{Raw: b}})
	}
	resp := &runtimehooksv1.GeneratePatchesResponse{}
	h.GeneratePatches(context.Background(), req, resp)
	g.Expect(resp.Status).To(Equal(runtimehooksv1.ResponseStatusSuccess), resp.Message)

	// The patched templates, by UID: those whose patch has operations.
	patched := map[types.UID]*unstructured.Unstructured{}
	for _, item := range resp.Items {
		p, err := jsonpatch.DecodePatch(item.Patch)
		g.Expect(err).NotTo(HaveOccurred())
		if len(p) == 0 {
			continue
		}
		for _, in := range req.Items {
			if in.UID == item.UID {
				out, err := p.Apply(in.Object.Raw)
				g.Expect(err).NotTo(HaveOccurred(), "the patch of %s applies", item.UID)
				obj := &unstructured.Unstructured{}
				g.Expect(obj.UnmarshalJSON(out)).To(Succeed())
				patched[item.UID] = obj
			}
		}
	}
	for uid, kind := range kinds {
		switch kind {
		case "KubeadmControlPlaneTemplate", "KubeadmConfigTemplate":
			g.Expect(patched).NotTo(HaveKey(uid), "kubeadm's templates are left alone")
		case "MonolithClusterTemplate":
			g.Expect(patched).To(HaveKey(uid))
			_, found, _ := unstructured.NestedMap(patched[uid].Object, "spec", "template", "spec", "backend", "docker")
			g.Expect(found).To(BeTrue(), "%s: docker backend", uid)
		case "MonolithMachineTemplate":
			g.Expect(patched).To(HaveKey(uid))
			expectPatchedMachine(g, patched[uid], uid, "spec", "template", "spec")
		case "MonolithMachinePoolTemplate":
			g.Expect(patched).To(HaveKey(uid))
			expectPatchedMachine(g, patched[uid], uid, "spec", "template", "spec", "template")
		}
	}
	g.Expect(kinds).To(ContainElements("KubeadmControlPlaneTemplate", "KubeadmConfigTemplate", "MonolithClusterTemplate",
		"MonolithMachineTemplate", "MonolithMachinePoolTemplate"))
}

// expectPatchedMachine checks the machine settings at path of a patched
// template: the docker node image and the pool the variables name.
func expectPatchedMachine(g Gomega, o *unstructured.Unstructured, uid types.UID, path ...string) {
	image, _, _ := unstructured.NestedString(o.Object, append(path, "backend", "docker", "image")...)
	g.Expect(image).To(Equal("node:2"), "%s: node image", uid)
	pools, _, _ := unstructured.NestedSlice(o.Object, append(path, "addressesFromPools")...)
	g.Expect(pools).To(ContainElement(HaveKeyWithValue("name", "nodes")), "%s: pools", uid)
}

// classTemplates reads the templates (every object but the ClusterClass)
// of the shipped ClusterClass file.
func classTemplates(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	g := NewWithT(t)
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "kustomize", "templates", "clusterclass-monolith.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	var out []*unstructured.Unstructured
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		g.Expect(err).NotTo(HaveOccurred())
		obj := &unstructured.Unstructured{}
		g.Expect(yaml.Unmarshal(doc, &obj.Object)).To(Succeed())
		if len(obj.Object) > 0 && obj.GetKind() != "ClusterClass" {
			out = append(out, obj)
		}
	}
}
