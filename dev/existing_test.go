package dev_test

import (
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"

	"github.com/capi-monolith/capi-monolith/dev"
	"github.com/capi-monolith/capi-monolith/test/envtest"
)

// With --kubeconfig dev starts no apiserver: it installs into the given
// cluster, and removes on exit what would otherwise point at nothing.
func TestAnExistingClusterIsLeftAsItWasOnExit(t *testing.T) {
	g := NewWithT(t)
	existing, err := envtest.Start(t.Context(), envtest.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = existing.Stop() })
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "existing.kubeconfig")
	g.Expect(existing.WriteKubeconfig(kubeconfig)).To(Succeed())

	r := startBinary(t, g, dir, "--kubeconfig="+kubeconfig, "--quiet")
	ctx := t.Context()
	g.Expect(r.client.Get(ctx, client.ObjectKey{Name: "monolithmachines.infrastructure.cluster.x-k8s.io"}, &apiextensionsv1.CustomResourceDefinition{})).To(Succeed(), "our CRDs are installed")
	for _, name := range []string{"capi-monolith-dev-core", "capi-monolith-dev-infra"} {
		g.Expect(existing.Client.Get(ctx, client.ObjectKey{Name: name}, &admissionregistrationv1.ValidatingWebhookConfiguration{})).To(Succeed(), name)
	}
	g.Expect(existing.Client.Get(ctx, client.ObjectKey{Name: dev.DefaultExtensionConfigName}, &runtimev1.ExtensionConfig{})).To(Succeed())

	r.interrupt(t, g)
	for _, name := range []string{"capi-monolith-dev-core", "capi-monolith-dev-infra"} {
		err := existing.Client.Get(ctx, client.ObjectKey{Name: name}, &admissionregistrationv1.ValidatingWebhookConfiguration{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%s: %v", name, err)
	}
	err = existing.Client.Get(ctx, client.ObjectKey{Name: dev.DefaultExtensionConfigName}, &runtimev1.ExtensionConfig{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "ExtensionConfig: %v", err)
	crd := &apiextensionsv1.CustomResourceDefinition{}
	g.Expect(existing.Client.Get(ctx, client.ObjectKey{Name: "clusters.cluster.x-k8s.io"}, crd)).To(Succeed())
	g.Expect(crd.Spec.Conversion.Strategy).To(Equal(apiextensionsv1.NoneConverter), "the conversion is given back")
}
