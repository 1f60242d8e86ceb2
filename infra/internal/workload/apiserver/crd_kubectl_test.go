package apiserver

import (
	"testing"

	. "github.com/onsi/gomega"

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

	out, err = kubectl("api-resources", "--api-group", "example.com")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(MatchRegexp(`widgets\s+wd\s+example.com/v1\s+true\s+Widget`))
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
	g.Expect(out).To(ContainSubstring(`the server doesn't have a resource type "wd"`))
	_, err = ts.clusters["c1"].store.Get(store.Resource{Group: "example.com", Resource: "widgets", Namespaced: true}, "default", "w1")
	g.Expect(err).To(HaveOccurred(), "the object went with its CRD")
}
