package bundle_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/component-base/logs"
	logsv1 "k8s.io/component-base/logs/api/v1"

	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	"sigs.k8s.io/cluster-api/cmd/clusterctl/client"
	utilyaml "sigs.k8s.io/cluster-api/util/yaml"

	"github.com/capi-monolith/capi-monolith/kustomize/bundle"
	"github.com/capi-monolith/capi-monolith/manager"
	"github.com/capi-monolith/capi-monolith/test/managertest"
)

// components reads a provider's components from the test repository the
// way `clusterctl init` does (variables processed, target namespace and
// labels applied).
func components(t *testing.T, p bundle.Provider, targetNamespace string) client.Components {
	t.Helper()
	g := NewWithT(t)
	c, err := clusterctlClient(context.Background())
	g.Expect(err).NotTo(HaveOccurred())
	comps, err := c.GetProviderComponents(context.Background(), bundle.ProviderName, clusterctlv1.ProviderType(p.Type),
		client.ComponentsOptions{Version: testVersion, TargetNamespace: targetNamespace})
	g.Expect(err).NotTo(HaveOccurred(), "clusterctl failed to read the %s components", p.Label)
	return comps
}

// allInOne is the all-in-one file with its variables processed by
// clusterctl (`clusterctl generate yaml`), every one at its default.
func allInOne(t *testing.T) []unstructured.Unstructured {
	t.Helper()
	g := NewWithT(t)
	raw, err := os.ReadFile(filepath.Join(repoDir, bundle.AllInOneFile))
	g.Expect(err).NotTo(HaveOccurred())
	c, err := clusterctlClient(context.Background())
	g.Expect(err).NotTo(HaveOccurred())
	tmpl, err := c.ProcessYAML(context.Background(), client.ProcessYAMLOptions{ReaderSource: &client.ReaderSourceOptions{Reader: bytes.NewReader(raw)}})
	g.Expect(err).NotTo(HaveOccurred(), "clusterctl failed to process the all-in-one file")
	y, err := tmpl.Yaml()
	g.Expect(err).NotTo(HaveOccurred())
	objs, err := utilyaml.ToUnstructured(y)
	g.Expect(err).NotTo(HaveOccurred())
	return objs
}

// rawObjects are the objects of a file of the test repository as written.
func rawObjects(t *testing.T, name string) []unstructured.Unstructured {
	t.Helper()
	g := NewWithT(t)
	raw, err := os.ReadFile(filepath.Join(repoDir, filepath.FromSlash(name)))
	g.Expect(err).NotTo(HaveOccurred())
	objs, err := utilyaml.ToUnstructured(raw)
	g.Expect(err).NotTo(HaveOccurred())
	return objs
}

func componentsPath(p bundle.Provider) string {
	return p.Label + "/" + testVersion + "/" + p.ComponentsFile
}

func ofKind(objs []unstructured.Unstructured, kind string) []unstructured.Unstructured {
	var out []unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

func names(objs []unstructured.Unstructured) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.GetName())
	}
	slices.Sort(out)
	return out
}

// namespaced asks the apiserver whether objects of o's kind are namespaced.
func namespaced(g Gomega, o unstructured.Unstructured) bool {
	gvk := o.GroupVersionKind()
	m, err := env.Client.RESTMapper().RESTMapping(schema.GroupKind{Group: gvk.Group, Kind: gvk.Kind}, gvk.Version)
	g.Expect(err).NotTo(HaveOccurred(), "the apiserver does not know %s", gvk)
	return m.Scope.Name() == "namespace"
}

// managerFlags parses the manager container's args of the one Deployment
// in objs with the binary's own flags (as main.go binds them), so an arg
// the binary does not know fails the test.
// samplePod are the downward API's values of the pod podEnv pretends the
// Deployment made.
var samplePod = map[string]string{
	"metadata.name": "manager-7d9f8-abcde",
	"metadata.uid":  "0b7e1f4c-6f7a-4b43-9f0e-2f3d5c1a9e11",
	"status.podIP":  "10.244.1.7",
}

// podEnv is the container's environment as the kubelet would set it in a
// pod of deployment: plain values, and downward API fields of samplePod
// (metadata.namespace: the Deployment's).
func podEnv(g Gomega, deployment unstructured.Unstructured, container map[string]any) map[string]string {
	env := map[string]string{}
	list, _, err := unstructured.NestedSlice(container, "env")
	g.Expect(err).NotTo(HaveOccurred())
	for _, e := range list {
		e := e.(map[string]any)
		name := e["name"].(string)
		if v, ok := e["value"].(string); ok {
			env[name] = v
			continue
		}
		path, _, _ := unstructured.NestedString(e, "valueFrom", "fieldRef", "fieldPath")
		switch {
		case path == "metadata.namespace":
			env[name] = deployment.GetNamespace()
		case samplePod[path] != "":
			env[name] = samplePod[path]
		}
	}
	return env
}

// expand replaces $(NAME) by env's NAME, as the kubelet expands a
// container's args; an unknown name stays as written.
func expand(arg string, env map[string]string) string {
	for name, v := range env {
		arg = strings.ReplaceAll(arg, "$("+name+")", v)
	}
	return arg
}

func managerFlags(t *testing.T, objs []unstructured.Unstructured) (*pflag.FlagSet, manager.Options) {
	t.Helper()
	g := NewWithT(t)
	deployments := ofKind(objs, "Deployment")
	g.Expect(deployments).To(HaveLen(1))
	containers, _, err := unstructured.NestedSlice(deployments[0].Object, "spec", "template", "spec", "containers")
	g.Expect(err).NotTo(HaveOccurred())
	var args []string
	found := false
	for _, c := range containers {
		c := c.(map[string]any)
		if c["name"] != "manager" {
			continue
		}
		found = true
		env := podEnv(g, deployments[0], c)
		for _, a := range c["args"].([]any) {
			args = append(args, expand(a.(string), env))
		}
	}
	g.Expect(found).To(BeTrue(), "no container named manager (clusterctl's contract)")

	fs := pflag.NewFlagSet("capi-monolith", pflag.ContinueOnError)
	var opts manager.Options
	managertest.BindFlags(fs, &opts)
	logsv1.AddFlags(logs.NewOptions(), fs)
	g.Expect(fs.Parse(args)).To(Succeed(), "the manager's args %q", args)
	g.Expect(fs.Args()).To(BeEmpty())
	g.Expect(opts.Validate()).To(Succeed())
	return fs, opts
}
