package apiserver

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
)

// The real kubectl applies a CRD, then a custom object of it (validating
// both with the OpenAPI documents, which then hold the CRD's), explains
// it, finds it by its short name and category, prints the CRD's columns,
// scales it, and deletes the CRD with its objects.
func TestKubectlAppliesACRDAndItsObjects(t *testing.T) {
	g := NewWithT(t)
	ts := startServerWith(t, Options{OpenAPI: managementOpenAPI(t)}, store.Options{}, "c1")
	_, kubectl := kubectlFor(t, ts, "c1")

	out, err := kubectl("apply", "-f", "testdata/crd/crd.yaml")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("customresourcedefinition.apiextensions.k8s.io/widgets.example.com created"))
	out, err = kubectl("wait", "--for", "condition=Established", "crd/widgets.example.com", "--timeout", "20s")
	g.Expect(err).NotTo(HaveOccurred(), out)
	// Applied again: unchanged; changed (a second short name): a
	// strategic merge patch of the CRD, its names accepted again.
	out, err = kubectl("apply", "-f", "testdata/crd/crd.yaml")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("unchanged"))
	crdYAML, err := os.ReadFile("testdata/crd/crd.yaml")
	g.Expect(err).NotTo(HaveOccurred())
	changed := filepath.Join(t.TempDir(), "crd.yaml")
	g.Expect(os.WriteFile(changed, []byte(strings.Replace(string(crdYAML), "shortNames: [wd]", "shortNames: [wd, wdg]", 1)), 0o600)).To(Succeed())
	out, err = kubectl("apply", "-f", changed)
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("configured"))
	out, err = kubectl("get", "crd", "widgets.example.com", "-o", "jsonpath={.status.acceptedNames.shortNames}")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(Equal(`["wd","wdg"]`))

	out, err = kubectl("apply", "-f", "testdata/crd/widget.yaml")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("widget.example.com/w1 created"))
	out, err = kubectl("apply", "-f", "testdata/crd/bad-widget.yaml")
	g.Expect(err).To(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring(`Unsupported value: "green"`))

	out, err = kubectl("explain", "widget.spec.color")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("KIND:       Widget"))
	g.Expect(out).To(MatchRegexp(`FIELD:\s+color <string>`))
	g.Expect(out).To(ContainSubstring("ENUM:"))
	out, err = kubectl("explain", "widget.spec", "--output", "plaintext-openapiv2")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(MatchRegexp(`color\s+<string>`))

	out, err = kubectl("api-resources", "--api-group", "example.com")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(MatchRegexp(`widgets\s+wd,wdg\s+example.com/v1\s+true\s+Widget`))
	out, err = kubectl("get", "wd")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(MatchRegexp(`NAME\s+COLOR\s+AGE`))
	g.Expect(out).To(MatchRegexp(`w1\s+red\s+`))
	out, err = kubectl("get", "gadgets", "-o", "name")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(Equal("widget.example.com/w1\n"))
	out, err = kubectl("get", "crds")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("widgets.example.com"))

	out, err = kubectl("scale", "widget/w1", "--replicas", "3")
	g.Expect(err).NotTo(HaveOccurred(), out)
	out, err = kubectl("get", "widget", "w1", "-o", "jsonpath={.spec.replicas}")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(Equal("3"))
	out, err = kubectl("apply", "--server-side", "-f", "testdata/crd/widget.yaml")
	g.Expect(err).NotTo(HaveOccurred(), out)

	out, err = kubectl("delete", "crd", "widgets.example.com", "--timeout", "20s")
	g.Expect(err).NotTo(HaveOccurred(), out)
	out, err = kubectl("get", "wd")
	g.Expect(err).To(HaveOccurred(), out)
	// kubectl's cached discovery still maps wd; the server no longer serves it.
	g.Expect(out).To(ContainSubstring("the server could not find the requested resource"))
	out, err = kubectl("api-resources", "--api-group", "example.com", "--cached=false")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).NotTo(ContainSubstring("widgets"))
	_, err = ts.clusters["c1"].store.Get(store.Resource{Group: "example.com", Resource: "widgets", Namespaced: true}, "default", "w1")
	g.Expect(err).To(HaveOccurred(), "the object went with its CRD")
}

// A cluster's OpenAPI documents describe its CRDs, and no other cluster's.
func TestOpenAPIDescribesACRDInItsClusterOnly(t *testing.T) {
	g := NewWithT(t)
	ts := startServerWith(t, Options{OpenAPI: managementOpenAPI(t)}, store.Options{}, "c1", "c2")
	ctx := context.Background()
	_, err := crdClient(t, ts.restConfig(t, "c1")).ApiextensionsV1().CustomResourceDefinitions().Create(ctx, widgetCRD(), metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())

	for cluster, want := range map[string]bool{"c1": true, "c2": false} {
		cs := clientset(t, ts, cluster)
		index, err := cs.Discovery().OpenAPIV3().Paths()
		g.Expect(err).NotTo(HaveOccurred())
		for _, gv := range []string{"apis/example.com/v1", "apis/example.com/v1beta1"} {
			if want {
				g.Expect(index).To(HaveKey(gv), "%s lists %s", cluster, gv)
			}
			if !want {
				g.Expect(index).NotTo(HaveKey(gv))
				continue
			}
			body, err := index[gv].Schema("application/json")
			g.Expect(err).NotTo(HaveOccurred())
			var doc struct {
				Components struct {
					Schemas map[string]struct {
						GVK        []metav1.GroupVersionKind `json:"x-kubernetes-group-version-kind"`
						Properties map[string]any            `json:"properties"`
					} `json:"schemas"`
				} `json:"components"`
			}
			g.Expect(json.Unmarshal(body, &doc)).To(Succeed())
			version := gv[len("apis/example.com/"):]
			widget := doc.Components.Schemas["com.example."+version+".Widget"]
			g.Expect(widget.GVK).To(ConsistOf(metav1.GroupVersionKind{Group: "example.com", Version: version, Kind: "Widget"}))
			g.Expect(widget.Properties).To(HaveKey("spec"))
		}
		v2, err := cs.Discovery().OpenAPISchema()
		g.Expect(err).NotTo(HaveOccurred())
		var names []string
		for _, d := range v2.GetDefinitions().GetAdditionalProperties() {
			names = append(names, d.GetName())
		}
		if want {
			g.Expect(names).To(ContainElements("com.example.v1.Widget", "com.example.v1beta1.Widget"))
		} else {
			g.Expect(names).NotTo(ContainElement("com.example.v1.Widget"))
		}
	}
}
