package flavortest_test

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"sigs.k8s.io/cluster-api/cmd/clusterctl/client/yamlprocessor"

	"github.com/capi-monolith/capi-monolith/test/flavortest"
)

// render processes a template of kustomize/templates with clusterctl's
// processor and every variable's default (or a value below).
func render(t *testing.T, file string) []*unstructured.Unstructured {
	t.Helper()
	g := NewWithT(t)
	data, err := os.ReadFile(filepath.Join("..", "..", "kustomize", "templates", file))
	g.Expect(err).NotTo(HaveOccurred())
	vars := map[string]string{"CLUSTER_NAME": "c", "NAMESPACE": "ns", "KUBERNETES_VERSION": "v1.36.3",
		"CONTROL_PLANE_MACHINE_COUNT": "3", "WORKER_MACHINE_COUNT": "2"}
	out, err := yamlprocessor.NewSimpleProcessor().Process(data, func(name string) (string, error) {
		if v, ok := vars[name]; ok {
			return v, nil
		}
		return "", errors.New("not set")
	})
	g.Expect(err).NotTo(HaveOccurred())
	var objs []*unstructured.Unstructured
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(out)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return objs
		}
		g.Expect(err).NotTo(HaveOccurred())
		obj := &unstructured.Unstructured{}
		g.Expect(yaml.Unmarshal(doc, &obj.Object)).To(Succeed())
		if len(obj.Object) > 0 {
			objs = append(objs, obj)
		}
	}
}

func byKind(objs []*unstructured.Unstructured) map[string][]*unstructured.Unstructured {
	out := map[string][]*unstructured.Unstructured{}
	for _, o := range objs {
		out[o.GetKind()] = append(out[o.GetKind()], o)
	}
	return out
}

func TestWithoutKubeadmSwapsTheKubeadmObjectsForTestOnes(t *testing.T) {
	for _, tc := range []struct{ file, workers string }{
		{"cluster-template-docker.yaml", "MachineDeployment"},
		{"cluster-template.yaml", "MachineDeployment"},
		{"cluster-template-machinepool.yaml", "MachinePool"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			g := NewWithT(t)
			in := render(t, tc.file)
			before := byKind(in)
			g.Expect(before).To(HaveKey("KubeadmControlPlane"), "the template uses kubeadm")

			out, err := flavortest.WithoutKubeadm(in)
			g.Expect(err).NotTo(HaveOccurred())
			kinds := byKind(out)
			for _, k := range []string{"KubeadmControlPlane", "KubeadmConfigTemplate", "KubeadmConfig"} {
				g.Expect(kinds).NotTo(HaveKey(k))
			}
			g.Expect(out[0].GetKind()).To(Equal("Cluster"))
			g.Expect(out[1].GetKind()).To(Equal("Secret"), "the bootstrap Secret right after the Cluster")
			g.Expect(out[1].GetName()).To(Equal(flavortest.BootstrapSecretName("c")))
			_, found, _ := unstructured.NestedMap(out[0].Object, "spec", "controlPlaneRef")
			g.Expect(found).To(BeFalse())

			// The control plane: a MachineDeployment of as many machines
			// labelled control-plane, from KCP's machine template.
			var cp *unstructured.Unstructured
			for _, md := range kinds["MachineDeployment"] {
				if md.GetName() == flavortest.ControlPlaneDeploymentName("c") {
					cp = md
				}
			}
			g.Expect(cp).NotTo(BeNil())
			// The YAML decoder reads numbers as float64.
			replicas, _, _ := unstructured.NestedFieldNoCopy(cp.Object, "spec", "replicas")
			g.Expect(replicas).To(BeNumerically("==", 3))
			labels, _, _ := unstructured.NestedStringMap(cp.Object, "spec", "template", "metadata", "labels")
			g.Expect(labels).To(HaveKey("cluster.x-k8s.io/control-plane"))
			infra, _, _ := unstructured.NestedString(cp.Object, "spec", "template", "spec", "infrastructureRef", "name")
			g.Expect(infra).To(Equal("c-control-plane"))
			version, _, _ := unstructured.NestedString(cp.Object, "spec", "template", "spec", "version")
			g.Expect(version).To(Equal("v1.36.3"))

			// Every machine takes the test bootstrap data.
			for _, o := range append(kinds["MachineDeployment"], kinds["MachinePool"]...) {
				b, _, _ := unstructured.NestedMap(o.Object, "spec", "template", "spec", "bootstrap")
				g.Expect(b).To(Equal(map[string]any{"dataSecretName": flavortest.BootstrapSecretName("c")}), "%s %s", o.GetKind(), o.GetName())
			}
			g.Expect(kinds[tc.workers]).NotTo(BeEmpty())

			// The rendered objects are left as they were.
			g.Expect(byKind(in)).To(Equal(before))
			_, found, _ = unstructured.NestedMap(before["Cluster"][0].Object, "spec", "controlPlaneRef")
			g.Expect(found).To(BeTrue())
		})
	}
}

// A ClusterClass flavor has no KubeadmControlPlane of its own to swap.
func TestWithoutKubeadmWantsAKubeadmControlPlane(t *testing.T) {
	for _, file := range []string{"cluster-template-topology.yaml", "cluster-template-development.yaml", "cluster-template-development-mp.yaml"} {
		t.Run(file, func(t *testing.T) {
			g := NewWithT(t)
			objs := render(t, file)
			g.Expect(byKind(objs)).To(HaveKey("Cluster"))
			g.Expect(byKind(objs)).NotTo(HaveKey("KubeadmControlPlane"))
			_, err := flavortest.WithoutKubeadm(objs)
			g.Expect(err).To(MatchError(ContainSubstring("KubeadmControlPlane")))
		})
	}
}
