package bundle_test

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capi-monolith/capi-monolith/contracts/crd"
)

// TestAllInOneApplies applies the all-in-one file (variables at their
// defaults) to a real apiserver: every object is created; nothing runs the
// Deployment.
func TestAllInOneApplies(t *testing.T) {
	ctx := context.Background()
	g := NewWithT(t)
	objs := allInOne(t)
	kinds := map[string]int{}
	for i := range objs {
		o := &objs[i]
		kinds[o.GetKind()]++
		if strings.HasSuffix(o.GetKind(), "WebhookConfiguration") {
			// Its Service has no endpoints here: remove it again so that
			// it does not refuse the other tests' objects.
			t.Cleanup(func() { g.Expect(client.IgnoreNotFound(env.Client.Delete(ctx, o.DeepCopy()))).To(Succeed()) })
		}
		g.Expect(env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(o.DeepCopy()),
			client.ForceOwnership, client.FieldOwner("bundle-test"))).To(Succeed(), "%s %s", o.GetKind(), o.GetName())
	}
	for _, kind := range []string{"Namespace", "CustomResourceDefinition", "ServiceAccount", "ClusterRole", "ClusterRoleBinding",
		"Role", "RoleBinding", "Service", "Deployment", "Issuer", "Certificate", "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"} {
		g.Expect(kinds).To(HaveKey(kind))
	}
	for _, o := range objs {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(o.GroupVersionKind())
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(&o), got)).To(Succeed(), "%s %s", o.GetKind(), o.GetName())
	}

	// Our CRDs, as the apiserver stored them, pass the contract checks.
	for _, o := range ofKind(objs, "CustomResourceDefinition") {
		c := &apiextensionsv1.CustomResourceDefinition{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: o.GetName()}, c)).To(Succeed())
		opts := []crd.Option{crd.InCategory("cluster-api")}
		if strings.HasSuffix(c.Spec.Names.Kind, "Template") {
			opts = append(opts, crd.Template())
		}
		if c.Spec.Scope == apiextensionsv1.ClusterScoped {
			opts = append(opts, crd.ClusterScoped())
		}
		g.Expect(crd.Check(c, opts...)).To(Succeed())
	}
}
