package crd_test

import (
	"testing"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capi-monolith/capi-monolith/contracts/crd"
)

func goodCRD() *apiextensionsv1.CustomResourceDefinition {
	status := &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}}
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{
			Name:   "monolithclusters.infrastructure.cluster.x-k8s.io",
			Labels: map[string]string{"cluster.x-k8s.io/v1beta2": "v1alpha1"},
		},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "infrastructure.cluster.x-k8s.io",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: "MonolithCluster", Plural: "monolithclusters", Categories: []string{"cluster-api"}},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
				{Name: "v1alpha1", Served: true, Storage: true, Subresources: status},
			},
		},
	}
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(*apiextensionsv1.CustomResourceDefinition)
		opts    []crd.Option
		wantErr []string
	}{
		{name: "a conforming CRD passes", mutate: func(*apiextensionsv1.CustomResourceDefinition) {}, opts: []crd.Option{crd.InCategory("cluster-api")}},
		{
			name:    "a name clusterctl would not compute is reported",
			mutate:  func(c *apiextensionsv1.CustomResourceDefinition) { c.Name = "monolithclusters.example.com" },
			wantErr: []string{`clusterctl expects "monolithclusters.infrastructure.cluster.x-k8s.io"`},
		},
		{
			name:    "a missing contract label is reported",
			mutate:  func(c *apiextensionsv1.CustomResourceDefinition) { c.Labels = nil },
			wantErr: []string{"has no cluster.x-k8s.io/v1beta2 label"},
		},
		{
			name: "a contract label naming an unserved version is reported",
			mutate: func(c *apiextensionsv1.CustomResourceDefinition) {
				c.Labels["cluster.x-k8s.io/v1beta2"] = "v1alpha1_v1alpha2"
			},
			wantErr: []string{`does not match its served versions [v1alpha1]`},
		},
		{
			name:    "a cluster-scoped kind is reported unless expected",
			mutate:  func(c *apiextensionsv1.CustomResourceDefinition) { c.Spec.Scope = apiextensionsv1.ClusterScoped },
			wantErr: []string{"is Cluster, expected Namespaced"},
		},
		{
			name:   "a cluster-scoped kind passes when expected",
			mutate: func(c *apiextensionsv1.CustomResourceDefinition) { c.Spec.Scope = apiextensionsv1.ClusterScoped },
			opts:   []crd.Option{crd.ClusterScoped()},
		},
		{
			name:    "a served version without status subresource is reported",
			mutate:  func(c *apiextensionsv1.CustomResourceDefinition) { c.Spec.Versions[0].Subresources = nil },
			wantErr: []string{"version v1alpha1 has no status subresource"},
		},
		{
			name:   "a template needs no status subresource",
			mutate: func(c *apiextensionsv1.CustomResourceDefinition) { c.Spec.Versions[0].Subresources = nil },
			opts:   []crd.Option{crd.Template()},
		},
		{
			name:    "a missing category is reported",
			mutate:  func(c *apiextensionsv1.CustomResourceDefinition) { c.Spec.Names.Categories = nil },
			opts:    []crd.Option{crd.InCategory("cluster-api")},
			wantErr: []string{`is not in category "cluster-api"`},
		},
		{
			name: "every problem is reported at once",
			mutate: func(c *apiextensionsv1.CustomResourceDefinition) {
				c.Labels = nil
				c.Spec.Versions[0].Subresources = nil
			},
			wantErr: []string{"has no cluster.x-k8s.io/v1beta2 label", "has no status subresource"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			c := goodCRD()
			tt.mutate(c)
			err := crd.Check(c, tt.opts...)
			if len(tt.wantErr) == 0 {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			for _, w := range tt.wantErr {
				g.Expect(err).To(MatchError(ContainSubstring(w)))
			}
		})
	}
}

// The loader reads every document of a multi-document file, as controller-gen
// and kustomize write them.
func TestLoadDirReadsMultiDocumentFiles(t *testing.T) {
	g := NewWithT(t)
	crds, err := crd.LoadDir("testdata")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(crds).To(HaveLen(2))
	g.Expect(crds[0].Spec.Names.Kind).To(Equal("MonolithCluster"))
	g.Expect(crd.Check(crds[0])).To(Succeed())
	g.Expect(crd.Check(crds[1])).To(MatchError(ContainSubstring("has no status subresource")))
}

func TestHasPathFindsNestedAndListFields(t *testing.T) {
	g := NewWithT(t)
	crds, err := crd.LoadDir("testdata")
	g.Expect(err).NotTo(HaveOccurred())
	c := crds[0].DeepCopy()
	c.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties = map[string]apiextensionsv1.JSONSchemaProps{
		"status": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"addresses": {Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{
				Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"address": {Type: "string"}},
			}}},
		}},
	}
	g.Expect(crd.HasPath(c, "status", "addresses", "address")).To(Succeed())
	g.Expect(crd.HasPath(c, "status", "addresses", "type")).To(MatchError(ContainSubstring("has no field status.addresses.type")))
	g.Expect(crd.HasPath(c, "spec")).To(MatchError(ContainSubstring("has no field spec")))
}
