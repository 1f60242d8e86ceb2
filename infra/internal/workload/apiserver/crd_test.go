package apiserver

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/ptr"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/journal"
	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
)

var (
	widgetsV1      = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	widgetsV1beta1 = schema.GroupVersionResource{Group: "example.com", Version: "v1beta1", Resource: "widgets"}
	gizmosV1       = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "gizmos"}
)

func crdClient(t testing.TB, cfg *rest.Config) apiextensionsclient.Interface {
	t.Helper()
	c, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func dynamicClient(t testing.TB, cfg *rest.Config) dynamic.Interface {
	t.Helper()
	c, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// widgetSchema exercises what structural schemas can say: defaults, an
// enum, bounds, preserved unknown fields, an embedded resource, an
// int-or-string, a map list, and a CEL rule.
func widgetSchema() *apiextensionsv1.JSONSchemaProps {
	return &apiextensionsv1.JSONSchemaProps{
		Type: "object",
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"spec": {
				Type: "object",
				XValidations: apiextensionsv1.ValidationRules{{
					Rule: "self.replicas <= self.maxReplicas", Message: "replicas must not exceed maxReplicas",
				}},
				Properties: map[string]apiextensionsv1.JSONSchemaProps{
					"replicas":    {Type: "integer", Format: "int32", Default: &apiextensionsv1.JSON{Raw: []byte("1")}, Minimum: ptr.To(0.0)},
					"maxReplicas": {Type: "integer", Default: &apiextensionsv1.JSON{Raw: []byte("10")}},
					"color": {Type: "string", Enum: []apiextensionsv1.JSON{
						{Raw: []byte(`"red"`)}, {Raw: []byte(`"blue"`)},
					}},
					"port":     {XIntOrString: true, AnyOf: []apiextensionsv1.JSONSchemaProps{{Type: "integer"}, {Type: "string"}}},
					"extra":    {Type: "object", XPreserveUnknownFields: ptr.To(true)},
					"template": {Type: "object", XEmbeddedResource: true, XPreserveUnknownFields: ptr.To(true)},
					"selector": {Type: "string"},
					"ports": {
						Type: "array", XListType: ptr.To("map"), XListMapKeys: []string{"name"},
						Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{
							Type: "object", Required: []string{"name"},
							Properties: map[string]apiextensionsv1.JSONSchemaProps{"name": {Type: "string"}, "number": {Type: "integer"}},
						}},
					},
				},
			},
			"status": {
				Type: "object",
				Properties: map[string]apiextensionsv1.JSONSchemaProps{
					"replicas": {Type: "integer"},
					"phase":    {Type: "string"},
				},
			},
		},
	}
}

// widgetCRD is namespaced, served as v1 (stored) and v1beta1, with v1alpha1
// not served, and has status and scale subresources.
func widgetCRD() *apiextensionsv1.CustomResourceDefinition {
	version := func(name string, served, storage bool) apiextensionsv1.CustomResourceDefinitionVersion {
		return apiextensionsv1.CustomResourceDefinitionVersion{
			Name: name, Served: served, Storage: storage,
			Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: widgetSchema()},
			Subresources: &apiextensionsv1.CustomResourceSubresources{
				Status: &apiextensionsv1.CustomResourceSubresourceStatus{},
				Scale: &apiextensionsv1.CustomResourceSubresourceScale{
					SpecReplicasPath: ".spec.replicas", StatusReplicasPath: ".status.replicas", LabelSelectorPath: ptr.To(".spec.selector"),
				},
			},
			AdditionalPrinterColumns: []apiextensionsv1.CustomResourceColumnDefinition{
				{Name: "Color", Type: "string", JSONPath: ".spec.color"},
				{Name: "Replicas", Type: "integer", JSONPath: ".spec.replicas"},
			},
		}
	}
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com",
			Names: apiextensionsv1.CustomResourceDefinitionNames{
				Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList",
				ShortNames: []string{"wd"}, Categories: []string{"gadgets"},
			},
			Scope:    apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{version("v1", true, true), version("v1beta1", true, false), version("v1alpha1", false, false)},
		},
	}
}

// gizmoCRD is cluster-scoped, one version, no subresources.
func gizmoCRD() *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "gizmos.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "gizmos", Singular: "gizmo", Kind: "Gizmo", ListKind: "GizmoList"},
			Scope: apiextensionsv1.ClusterScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"size": {Type: "integer"}}},
					},
				}},
			}},
		},
	}
}

func widget(version, namespace, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetAPIVersion("example.com/" + version)
	u.SetKind("Widget")
	u.SetNamespace(namespace)
	u.SetName(name)
	return u
}

func condition(crd *apiextensionsv1.CustomResourceDefinition, t apiextensionsv1.CustomResourceDefinitionConditionType) apiextensionsv1.CustomResourceDefinitionCondition {
	for _, c := range crd.Status.Conditions {
		if c.Type == t {
			return c
		}
	}
	return apiextensionsv1.CustomResourceDefinitionCondition{}
}

func TestCRDIsEstablishedAndDiscovered(t *testing.T) {
	g := NewWithT(t)
	ts := startServer(t, store.Options{}, "c1", "c2")
	cfg := ts.restConfig(t, "c1")
	ctx := context.Background()

	created, err := crdClient(t, cfg).ApiextensionsV1().CustomResourceDefinitions().Create(ctx, widgetCRD(), metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(created.Finalizers).To(ConsistOf(apiextensionsv1.CustomResourceCleanupFinalizer))
	g.Expect(created.Spec.Conversion.Strategy).To(Equal(apiextensionsv1.NoneConverter), "defaulted")

	crd, err := crdClient(t, cfg).ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "widgets.example.com", metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(condition(crd, apiextensionsv1.Established).Status).To(Equal(apiextensionsv1.ConditionTrue))
	g.Expect(condition(crd, apiextensionsv1.NamesAccepted)).To(And(
		HaveField("Status", apiextensionsv1.ConditionTrue), HaveField("Reason", "NoConflicts")))
	g.Expect(crd.Status.AcceptedNames).To(Equal(widgetCRD().Spec.Names))
	g.Expect(crd.Status.StoredVersions).To(Equal([]string{"v1"}))
	_, err = crdClient(t, cfg).ApiextensionsV1().CustomResourceDefinitions().Create(ctx, gizmoCRD(), metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())

	for _, legacy := range []bool{false, true} {
		dc, err := discovery.NewDiscoveryClientForConfig(cfg)
		g.Expect(err).NotTo(HaveOccurred())
		dc.UseLegacyDiscovery = legacy
		groups, lists, err := dc.ServerGroupsAndResources()
		g.Expect(err).NotTo(HaveOccurred())
		var example *metav1.APIGroup
		for _, gr := range groups {
			if gr.Name == "example.com" {
				example = gr
			}
		}
		g.Expect(example).NotTo(BeNil(), "legacy=%v", legacy)
		g.Expect(example.PreferredVersion.Version).To(Equal("v1"))
		g.Expect(example.Versions).To(HaveLen(2), "v1alpha1 is not served")
		served := map[string]metav1.APIResource{}
		for _, l := range lists {
			for _, r := range l.APIResources {
				served[l.GroupVersion+"/"+r.Name] = r
			}
		}
		g.Expect(served).To(HaveKey("apiextensions.k8s.io/v1/customresourcedefinitions"))
		g.Expect(served["apiextensions.k8s.io/v1/customresourcedefinitions"].ShortNames).To(ConsistOf("crd", "crds"))
		for _, v := range []string{"v1", "v1beta1"} {
			w := served["example.com/"+v+"/widgets"]
			g.Expect(w.Namespaced).To(BeTrue())
			g.Expect(w.Kind).To(Equal("Widget"))
			g.Expect(w.ShortNames).To(ConsistOf("wd"))
			g.Expect(w.Categories).To(ConsistOf("gadgets"))
			g.Expect(served).To(HaveKey("example.com/" + v + "/widgets/status"))
			g.Expect(served["example.com/"+v+"/widgets/scale"].Kind).To(Equal("Scale"))
		}
		g.Expect(served).NotTo(HaveKey("example.com/v1alpha1/widgets"))
		g.Expect(served["example.com/v1/gizmos"].Namespaced).To(BeFalse())
	}

	// client-go's RESTMapper and short name expansion, as kubectl uses them.
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	g.Expect(err).NotTo(HaveOccurred())
	mapper := restmapper.NewShortcutExpander(restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc)), dc, nil)
	m, err := mapper.RESTMapping(schema.GroupKind{Group: "example.com", Kind: "Widget"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(m.Resource).To(Equal(widgetsV1))
	gvr, err := mapper.ResourceFor(schema.GroupVersionResource{Resource: "wd"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(gvr).To(Equal(widgetsV1))

	// v1alpha1 is not served; the other cluster serves none of it.
	dyn := dynamicClient(t, cfg)
	_, err = dyn.Resource(schema.GroupVersionResource{Group: "example.com", Version: "v1alpha1", Resource: "widgets"}).Namespace("default").List(ctx, metav1.ListOptions{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%v", err)
	_, err = dynamicClient(t, ts.restConfig(t, "c2")).Resource(widgetsV1).Namespace("default").List(ctx, metav1.ListOptions{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "another cluster's CRD is not served: %v", err)
	_, err = crdClient(t, ts.restConfig(t, "c2")).ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "widgets.example.com", metav1.GetOptions{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
}

func TestCustomObjectsFollowTheirSchema(t *testing.T) {
	g := NewWithT(t)
	ts := startServer(t, store.Options{}, "c1")
	cfg := ts.restConfig(t, "c1")
	ctx := context.Background()
	_, err := crdClient(t, cfg).ApiextensionsV1().CustomResourceDefinitions().Create(ctx, widgetCRD(), metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	dyn := dynamicClient(t, cfg)
	widgets := dyn.Resource(widgetsV1).Namespace("default")

	// Pruning, defaulting, preserved unknown fields, an embedded resource,
	// an int-or-string; created in v1beta1, read in both versions.
	in := widget("v1beta1", "default", "w1", map[string]any{
		"color": "red", "port": "http", "bogus": true,
		"extra":    map[string]any{"anything": map[string]any{"goes": "here"}},
		"template": map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "p", "bogus": 1}, "spec": map[string]any{}},
	})
	in.Object["status"] = map[string]any{"phase": "Set"}
	in.Object["topLevelBogus"] = "x"
	created, err := dyn.Resource(widgetsV1beta1).Namespace("default").Create(ctx, in, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(created.GetAPIVersion()).To(Equal("example.com/v1beta1"))
	spec, _, _ := unstructured.NestedMap(created.Object, "spec")
	g.Expect(spec).NotTo(HaveKey("bogus"), "pruned")
	g.Expect(created.Object).NotTo(HaveKey("topLevelBogus"))
	g.Expect(created.Object).NotTo(HaveKey("status"), "a create does not set the status")
	g.Expect(spec).To(HaveKeyWithValue("replicas", int64(1)), "defaulted")
	g.Expect(spec).To(HaveKeyWithValue("maxReplicas", int64(10)))
	g.Expect(spec).To(HaveKeyWithValue("port", "http"))
	g.Expect(spec["extra"]).To(Equal(map[string]any{"anything": map[string]any{"goes": "here"}}), "x-kubernetes-preserve-unknown-fields")
	g.Expect(spec["template"]).To(HaveKeyWithValue("metadata", map[string]any{"name": "p"}), "an embedded resource's metadata is ObjectMeta")
	g.Expect(created.GetGeneration()).To(Equal(int64(1)))

	v1, err := widgets.Get(ctx, "w1", metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v1.GetAPIVersion()).To(Equal("example.com/v1"), "read in the version asked for")
	g.Expect(v1.GetUID()).To(Equal(created.GetUID()))
	stored, err := ts.clusters["c1"].store.Get(store.Resource{Group: "example.com", Resource: "widgets", Namespaced: true}, "default", "w1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(stored.GetAPIVersion()).To(Equal("example.com/v1"), "stored in the storage version")
	list, err := dyn.Resource(widgetsV1beta1).Namespace("").List(ctx, metav1.ListOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(list.GetKind()).To(Equal("WidgetList"))
	g.Expect(list.Items).To(HaveLen(1))
	g.Expect(list.Items[0].GetAPIVersion()).To(Equal("example.com/v1beta1"))

	// Objects the schema refuses are 422 Invalid with the field's path.
	for name, spec := range map[string]map[string]any{
		"enum":    {"color": "green"},
		"minimum": {"replicas": -1},
		"type":    {"replicas": "three"},
		"cel":     {"replicas": 5, "maxReplicas": 2},
		"maplist": {"ports": []any{map[string]any{"name": "a"}, map[string]any{"name": "a"}}},
	} {
		_, err := widgets.Create(ctx, widget("v1", "default", "bad-"+name, spec), metav1.CreateOptions{})
		g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%s: %v", name, err)
		g.Expect(err.(apierrors.APIStatus).Status().Details.Causes).NotTo(BeEmpty(), name)
	}
	_, err = widgets.Create(ctx, widget("v1", "default", "Not_A_Name", nil), metav1.CreateOptions{})
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
	err = rawStatusErr(dyn, widgetsV1, "default", "w1", types.StrategicMergePatchType, `{"spec":{"color":"blue"}}`)
	g.Expect(apierrors.IsUnsupportedMediaType(err)).To(BeTrue(), "custom kinds take no strategic merge patch: %v", err)

	// fieldValidation=Strict refuses unknown fields.
	_, err = widgets.Create(ctx, widget("v1", "default", "strict", map[string]any{"bogus": 1}), metav1.CreateOptions{FieldValidation: "Strict"})
	g.Expect(apierrors.IsBadRequest(err)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring(`unknown field "spec.bogus"`))

	// The status subresource: the main resource keeps the status, status
	// writes change only the status.
	cur, err := widgets.Get(ctx, "w1", metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	cur.Object["status"] = map[string]any{"replicas": int64(1), "phase": "Running"}
	_ = unstructured.SetNestedField(cur.Object, "ignored", "spec", "selector")
	st, err := widgets.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.Object["status"]).To(HaveKeyWithValue("phase", "Running"))
	g.Expect(st.Object["spec"]).NotTo(HaveKey("selector"), "a status write changes only the status")
	st.Object["status"] = map[string]any{"phase": "Lost"}
	_ = unstructured.SetNestedField(st.Object, "blue", "spec", "color")
	upd, err := widgets.Update(ctx, st, metav1.UpdateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(upd.Object["status"]).To(HaveKeyWithValue("phase", "Running"), "an update of the main resource keeps the status")
	g.Expect(upd.GetGeneration()).To(Equal(int64(2)))

	// The scale subresource, through client-go's scale client shape.
	_, err = widgets.Patch(ctx, "w1", types.MergePatchType, []byte(`{"spec":{"selector":"app=w1"}}`), metav1.PatchOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	scale := &autoscalingv1.Scale{}
	rc := restClientFor(t, cfg)
	g.Expect(rc.Get().AbsPath("/apis/example.com/v1/namespaces/default/widgets/w1/scale").Do(ctx).Into(scale)).To(Succeed())
	g.Expect(scale.Spec.Replicas).To(Equal(int32(1)))
	g.Expect(scale.Status.Replicas).To(Equal(int32(1)))
	g.Expect(scale.Status.Selector).To(Equal("app=w1"))
	scale.Spec.Replicas = 3
	out := &autoscalingv1.Scale{}
	g.Expect(rc.Put().AbsPath("/apis/example.com/v1/namespaces/default/widgets/w1/scale").Body(mustJSON(t, scale)).Do(ctx).Into(out)).To(Succeed())
	g.Expect(out.Spec.Replicas).To(Equal(int32(3)))
	g.Expect(rc.Patch(types.MergePatchType).AbsPath("/apis/example.com/v1beta1/namespaces/default/widgets/w1/scale").
		Body([]byte(`{"spec":{"replicas":4}}`)).Do(ctx).Into(out)).To(Succeed())
	g.Expect(out.Spec.Replicas).To(Equal(int32(4)))
	got, err := widgets.Get(ctx, "w1", metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Object["spec"]).To(HaveKeyWithValue("replicas", int64(4)))
	err = rc.Patch(types.MergePatchType).AbsPath("/apis/example.com/v1/namespaces/default/widgets/w1/scale").
		Body([]byte(`{"spec":{"replicas":20}}`)).Do(ctx).Error()
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "the CEL rule holds through scale: %v", err)
	scale.ResourceVersion = "1"
	err = rc.Put().AbsPath("/apis/example.com/v1/namespaces/default/widgets/w1/scale").Body(mustJSON(t, scale)).Do(ctx).Error()
	g.Expect(apierrors.IsConflict(err)).To(BeTrue(), "%v", err)

	// Server-side apply of a custom object.
	applied := widget("v1", "default", "w2", map[string]any{"color": "blue"})
	w2, err := widgets.Apply(ctx, "w2", applied, metav1.ApplyOptions{FieldManager: "test"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(w2.Object["spec"]).To(HaveKeyWithValue("replicas", int64(1)))
	g.Expect(w2.GetManagedFields()).NotTo(BeEmpty())

	// A cluster-scoped CRD's objects.
	_, err = crdClient(t, cfg).ApiextensionsV1().CustomResourceDefinitions().Create(ctx, gizmoCRD(), metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	gz := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Gizmo", "metadata": map[string]any{"name": "g1"}, "spec": map[string]any{"size": 3}}}
	gzOut, err := dyn.Resource(gizmosV1).Create(ctx, gz, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(gzOut.GetNamespace()).To(BeEmpty())
	_, err = dyn.Resource(gizmosV1).Namespace("default").Get(ctx, "g1", metav1.GetOptions{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%v", err)
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func restClientFor(t testing.TB, cfg *rest.Config) rest.Interface {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return dc.RESTClient()
}

func rawStatusErr(dyn dynamic.Interface, gvr schema.GroupVersionResource, ns, name string, pt types.PatchType, body string) error {
	_, err := dyn.Resource(gvr).Namespace(ns).Patch(context.Background(), name, pt, []byte(body), metav1.PatchOptions{})
	return err
}

func TestInvalidCRDsAreRefused(t *testing.T) {
	g := NewWithT(t)
	ts := startServer(t, store.Options{}, "c1")
	crds := crdClient(t, ts.restConfig(t, "c1")).ApiextensionsV1().CustomResourceDefinitions()
	ctx := context.Background()

	for name, mutate := range map[string]func(*apiextensionsv1.CustomResourceDefinition){
		"the name is not plural.group": func(c *apiextensionsv1.CustomResourceDefinition) { c.Name = "widget.example.com" },
		"no kind":                      func(c *apiextensionsv1.CustomResourceDefinition) { c.Spec.Names.Kind = "" },
		"two storage versions":         func(c *apiextensionsv1.CustomResourceDefinition) { c.Spec.Versions[1].Storage = true },
		"a non-structural schema": func(c *apiextensionsv1.CustomResourceDefinition) {
			for i := range c.Spec.Versions {
				c.Spec.Versions[i].Schema.OpenAPIV3Schema.Properties["spec"] = apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"x": {}}}
			}
		},
		"a bad CEL rule": func(c *apiextensionsv1.CustomResourceDefinition) {
			for i := range c.Spec.Versions {
				s := c.Spec.Versions[i].Schema.OpenAPIV3Schema.Properties["spec"]
				s.XValidations = apiextensionsv1.ValidationRules{{Rule: "self.nope >"}}
				c.Spec.Versions[i].Schema.OpenAPIV3Schema.Properties["spec"] = s
			}
		},
		"a scale path outside spec": func(c *apiextensionsv1.CustomResourceDefinition) {
			c.Spec.Versions[0].Subresources.Scale.SpecReplicasPath = ".status.replicas"
		},
	} {
		crd := widgetCRD()
		mutate(crd)
		_, err := crds.Create(ctx, crd, metav1.CreateOptions{})
		g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%s: %v", name, err)
		st := err.(apierrors.APIStatus).Status()
		g.Expect(st.Details.Kind).To(Equal("CustomResourceDefinition"), name)
		g.Expect(st.Details.Group).To(Equal("apiextensions.k8s.io"), name)
		g.Expect(st.Details.Causes).NotTo(BeEmpty(), name)
	}
	list, err := crds.List(ctx, metav1.ListOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(list.Items).To(BeEmpty())

	// An update is validated too: the group cannot change, a stored
	// version cannot go.
	created, err := crds.Create(ctx, widgetCRD(), metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	changed := created.DeepCopy()
	changed.Spec.Versions = changed.Spec.Versions[1:]
	changed.Spec.Versions[0].Storage = true
	_, err = crds.Update(ctx, changed, metav1.UpdateOptions{})
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring("storedVersions"))
}

func TestConflictingNamesAreNotAccepted(t *testing.T) {
	g := NewWithT(t)
	ts := startServer(t, store.Options{}, "c1")
	cfg := ts.restConfig(t, "c1")
	crds := crdClient(t, cfg).ApiextensionsV1().CustomResourceDefinitions()
	ctx := context.Background()
	_, err := crds.Create(ctx, widgetCRD(), metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())

	// Another CRD of the group asking for the kind Widget.
	other := gizmoCRD()
	other.Spec.Names.Kind, other.Spec.Names.ListKind = "Widget", "WidgetList"
	_, err = crds.Create(ctx, other, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	got, err := crds.Get(ctx, other.Name, metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(condition(got, apiextensionsv1.NamesAccepted)).To(And(
		HaveField("Status", apiextensionsv1.ConditionFalse), HaveField("Reason", "ListKindConflict")))
	g.Expect(condition(got, apiextensionsv1.Established)).To(And(
		HaveField("Status", apiextensionsv1.ConditionFalse), HaveField("Reason", "NotAccepted")))
	g.Expect(got.Status.AcceptedNames.Plural).To(Equal("gizmos"), "the names without conflict are accepted")
	_, err = dynamicClient(t, cfg).Resource(gizmosV1).List(ctx, metav1.ListOptions{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "a CRD that is not established is not served: %v", err)

	// Fixing the kind establishes it.
	got.Spec.Names.Kind, got.Spec.Names.ListKind = "Gizmo", "GizmoList"
	_, err = crds.Update(ctx, got, metav1.UpdateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	got, err = crds.Get(ctx, other.Name, metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(condition(got, apiextensionsv1.Established).Status).To(Equal(apiextensionsv1.ConditionTrue))
	_, err = dynamicClient(t, cfg).Resource(gizmosV1).List(ctx, metav1.ListOptions{})
	g.Expect(err).NotTo(HaveOccurred())
}

func TestDeletingACRDDeletesItsObjects(t *testing.T) {
	g := NewWithT(t)
	ts := startServer(t, store.Options{}, "c1")
	cfg := ts.restConfig(t, "c1")
	crds := crdClient(t, cfg).ApiextensionsV1().CustomResourceDefinitions()
	ctx := context.Background()
	_, err := crds.Create(ctx, widgetCRD(), metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	widgets := dynamicClient(t, cfg).Resource(widgetsV1)
	_, err = widgets.Namespace("default").Create(ctx, widget("v1", "default", "plain", nil), metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	held := widget("v1", "kube-system", "held", nil)
	held.SetFinalizers([]string{"example.com/hold"})
	_, err = widgets.Namespace("kube-system").Create(ctx, held, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())

	w, err := widgets.Watch(ctx, metav1.ListOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	defer w.Stop()

	g.Expect(crds.Delete(ctx, "widgets.example.com", metav1.DeleteOptions{})).To(Succeed())
	crd, err := crds.Get(ctx, "widgets.example.com", metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred(), "held by an object's finalizer")
	g.Expect(crd.DeletionTimestamp).NotTo(BeNil())
	g.Expect(condition(crd, apiextensionsv1.Terminating).Status).To(Equal(apiextensionsv1.ConditionTrue))
	_, err = widgets.Namespace("default").Get(ctx, "plain", metav1.GetOptions{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%v", err)
	h, err := widgets.Namespace("kube-system").Get(ctx, "held", metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(h.GetDeletionTimestamp()).NotTo(BeNil())
	_, err = widgets.Namespace("default").Create(ctx, widget("v1", "default", "late", nil), metav1.CreateOptions{})
	g.Expect(apierrors.IsMethodNotSupported(err)).To(BeTrue(), "no creates while the CRD is terminating: %v", err)

	// The last finalizer removed, the object goes, and the CRD with it.
	_, err = widgets.Namespace("kube-system").Patch(ctx, "held", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = crds.Get(ctx, "widgets.example.com", metav1.GetOptions{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%v", err)
	_, err = widgets.List(ctx, metav1.ListOptions{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "no longer served: %v", err)
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	g.Expect(err).NotTo(HaveOccurred())
	groups, err := dc.ServerGroups()
	g.Expect(err).NotTo(HaveOccurred())
	for _, gr := range groups.Groups {
		g.Expect(gr.Name).NotTo(Equal("example.com"))
	}

	var deleted []string
	g.Eventually(func() []string {
		select {
		case e := <-w.ResultChan():
			if e.Type == "DELETED" {
				deleted = append(deleted, e.Object.(*unstructured.Unstructured).GetName())
			}
		default:
		}
		return deleted
	}, 5*time.Second, 10*time.Millisecond).Should(ConsistOf("plain", "held"), "watchers see the objects go")

	// A CRD of the same name starts empty.
	_, err = crds.Create(ctx, widgetCRD(), metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	list, err := widgets.List(ctx, metav1.ListOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(list.Items).To(BeEmpty())
}

func TestCRDsAreServedAgainAfterARestart(t *testing.T) {
	g := NewWithT(t)
	path := filepath.Join(t.TempDir(), "c1.journal")
	open := func() store.Options {
		j, restored, err := journal.Open(journal.Options{Path: path})
		g.Expect(err).NotTo(HaveOccurred())
		t.Cleanup(func() { _ = j.Close() })
		return store.Options{Journal: j, Restored: restored}
	}
	ts := startServer(t, open(), "c1")
	ctx := context.Background()
	_, err := crdClient(t, ts.restConfig(t, "c1")).ApiextensionsV1().CustomResourceDefinitions().Create(ctx, widgetCRD(), metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	created, err := dynamicClient(t, ts.restConfig(t, "c1")).Resource(widgetsV1).Namespace("default").
		Create(ctx, widget("v1", "default", "w1", map[string]any{"color": "red"}), metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())

	// Another process: a new store from the journal, a new Handler.
	ts2 := startServer(t, open(), "c1")
	got, err := dynamicClient(t, ts2.restConfig(t, "c1")).Resource(widgetsV1beta1).Namespace("default").Get(ctx, "w1", metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.GetUID()).To(Equal(created.GetUID()))
	g.Expect(got.GetAPIVersion()).To(Equal("example.com/v1beta1"))
	_, err = dynamicClient(t, ts2.restConfig(t, "c1")).Resource(widgetsV1).Namespace("default").
		Create(ctx, widget("v1", "default", "bad", map[string]any{"color": "green"}), metav1.CreateOptions{})
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "validated by the restored schema: %v", err)
}

// An update that sends no uid or creation time (a PUT written by hand)
// keeps the stored ones, as kube-apiserver does, rather than failing
// their immutability; one without a resourceVersion is refused, as
// kube-apiserver refuses unconditional updates of CRDs and custom objects.
func TestAnUpdateWithoutSystemFieldsKeepsThem(t *testing.T) {
	g := NewWithT(t)
	ts := startServer(t, store.Options{}, "c1")
	cfg := ts.restConfig(t, "c1")
	ctx := context.Background()
	crds := crdClient(t, cfg).ApiextensionsV1().CustomResourceDefinitions()
	created, err := crds.Create(ctx, gizmoCRD(), metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	current, err := crds.Get(ctx, created.Name, metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	bare := gizmoCRD()
	bare.ResourceVersion = current.ResourceVersion
	bare.Spec.Names.ShortNames = []string{"gz"}
	updated, err := crds.Update(ctx, bare, metav1.UpdateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(updated.UID).To(Equal(created.UID))
	g.Expect(updated.Spec.Names.ShortNames).To(ConsistOf("gz"))

	gizmos := dynamicClient(t, cfg).Resource(gizmosV1)
	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Gizmo", "metadata": map[string]any{"name": "g1"}}}
	first, err := gizmos.Create(ctx, obj, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	obj.Object["spec"] = map[string]any{"size": int64(2)}
	_, err = gizmos.Update(ctx, obj, metav1.UpdateOptions{})
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "custom objects take no unconditional update, as in kube-apiserver: %v", err)
	g.Expect(err.Error()).To(ContainSubstring("metadata.resourceVersion"))
	obj.SetResourceVersion(first.GetResourceVersion())
	second, err := gizmos.Update(ctx, obj, metav1.UpdateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(second.GetUID()).To(Equal(first.GetUID()))
	g.Expect(second.GetGeneration()).To(Equal(int64(2)))
}

// A CRD already in the store when the Handler first serves the cluster
// (restored from a journal, or written straight into the store as the
// fuzz store's) is given its status and served from that first request.
func TestACRDInTheStoreIsServedFromTheClustersFirstRequest(t *testing.T) {
	g := NewWithT(t)
	st := fuzzStore(t)
	defer st.Close()
	h, err := New(Options{StoreFor: func(*http.Request) (*store.Store, error) { return st, nil }})
	g.Expect(err).NotTo(HaveOccurred())
	w, _, _ := serveOne(h, http.MethodGet, "/apis/example.com/v1beta1/namespaces/default/widgets/w1", "", "", nil)
	g.Expect(w.Code).To(Equal(http.StatusOK), w.Body.String())
	g.Expect(w.Body.String()).To(ContainSubstring(`"apiVersion":"example.com/v1beta1"`))
	crd, err := st.Get(crdResource.storeResource(), "", "widgets.example.com")
	g.Expect(err).NotTo(HaveOccurred())
	conditions, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	g.Expect(conditions).To(ContainElement(HaveKeyWithValue("type", "Established")))
}
