package dev_test

import (
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
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
	for _, name := range devWebhookConfigurations {
		g.Expect(existing.Client.Get(ctx, client.ObjectKey{Name: name}, &admissionregistrationv1.ValidatingWebhookConfiguration{})).To(Succeed(), name)
	}
	g.Expect(existing.Client.Get(ctx, client.ObjectKey{Name: dev.DefaultExtensionConfigName}, &runtimev1.ExtensionConfig{})).To(Succeed())
	for _, pid := range descendants(r.cmd.Process.Pid) {
		g.Expect(processName(pid)).NotTo(Equal(kubeControllerManagerComm), "an existing cluster runs its own controller manager")
	}

	r.interrupt(t, g)
	for _, name := range devWebhookConfigurations {
		err := existing.Client.Get(ctx, client.ObjectKey{Name: name}, &admissionregistrationv1.ValidatingWebhookConfiguration{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%s: %v", name, err)
	}
	err = existing.Client.Get(ctx, client.ObjectKey{Name: dev.DefaultExtensionConfigName}, &runtimev1.ExtensionConfig{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "ExtensionConfig: %v", err)
	for _, name := range convertedCRDs {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		g.Expect(existing.Client.Get(ctx, client.ObjectKey{Name: name}, crd)).To(Succeed())
		g.Expect(crd.Spec.Conversion.Strategy).To(Equal(apiextensionsv1.NoneConverter), "the conversion of %s is given back", name)
	}
}

// convertedCRDs are CRDs of each Cluster API manager whose conversion dev
// points at that manager.
var convertedCRDs = []string{
	"clusters.cluster.x-k8s.io", "kubeadmconfigs.bootstrap.cluster.x-k8s.io", "kubeadmcontrolplanes.controlplane.cluster.x-k8s.io",
}

// kill -9 of dev in --kubeconfig mode leaves webhooks with failurePolicy
// Fail and CRD conversion pointing at a dead port: `dev --cleanup` undoes
// it, and so does the next start.
func TestAnExistingClusterIsRepairedAfterDevWasKilled(t *testing.T) {
	g := NewWithT(t)
	existing, err := envtest.Start(t.Context(), envtest.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = existing.Stop() })
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "existing.kubeconfig")
	g.Expect(existing.WriteKubeconfig(kubeconfig)).To(Succeed())
	ctx := t.Context()

	kill := func() {
		r := startBinary(t, g, dir, "--kubeconfig="+kubeconfig, "--quiet")
		children := descendants(r.cmd.Process.Pid)
		g.Expect(r.cmd.Process.Signal(syscall.SIGKILL)).To(Succeed())
		g.Eventually(r.exited).WithTimeout(exitTimeout).Should(Receive())
		expectGone(g, children)
		// What the killed dev left is there: this is what must be undone.
		for _, name := range devWebhookConfigurations {
			g.Expect(existing.Client.Get(ctx, client.ObjectKey{Name: name}, &admissionregistrationv1.ValidatingWebhookConfiguration{})).To(Succeed(), name)
		}
		for _, name := range convertedCRDs {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			g.Expect(existing.Client.Get(ctx, client.ObjectKey{Name: name}, crd)).To(Succeed())
			g.Expect(crd.Spec.Conversion.Strategy).To(Equal(apiextensionsv1.WebhookConverter), name)
		}
	}
	expectAsFound := func() {
		for _, name := range devWebhookConfigurations {
			err := existing.Client.Get(ctx, client.ObjectKey{Name: name}, &admissionregistrationv1.ValidatingWebhookConfiguration{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%s: %v", name, err)
			err = existing.Client.Get(ctx, client.ObjectKey{Name: name}, &admissionregistrationv1.MutatingWebhookConfiguration{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%s: %v", name, err)
		}
		err := existing.Client.Get(ctx, client.ObjectKey{Name: dev.DefaultExtensionConfigName}, &runtimev1.ExtensionConfig{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "ExtensionConfig: %v", err)
		for _, name := range convertedCRDs {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			g.Expect(existing.Client.Get(ctx, client.ObjectKey{Name: name}, crd)).To(Succeed())
			g.Expect(crd.Spec.Conversion.Strategy).To(Equal(apiextensionsv1.NoneConverter), "the conversion of %s is given back", name)
			g.Expect(crd.Annotations).NotTo(HaveKey("dev.capi-monolith.io/original-conversion"), name)
		}
		// The cluster serves Cluster API objects again.
		g.Expect(existing.Client.List(ctx, &clusterv1.ClusterList{})).To(Succeed())
	}

	kill()
	out, err := exec.Command(binary, "dev", "--cleanup", "--kubeconfig="+kubeconfig).CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "%s", out)
	g.Expect(string(out)).To(ContainSubstring("Removed from the cluster of " + kubeconfig))
	expectAsFound()

	kill()
	r := startBinary(t, g, dir, "--kubeconfig="+kubeconfig)
	g.Expect(r.stderr.String()).To(ContainSubstring("repaired what a killed capi-monolith dev left in the cluster"))
	r.interrupt(t, g)
	expectAsFound()
}
