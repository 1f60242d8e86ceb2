package bundle_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	clusterctl "sigs.k8s.io/cluster-api/cmd/clusterctl/client"

	"github.com/capi-monolith/capi-monolith/kustomize/bundle"
	"github.com/capi-monolith/capi-monolith/test/envtest"
)

// coreRepository writes Cluster API core's provider repository for the
// pinned version (core-components built with krusty from the module's
// core/config/default, and its metadata.yaml) under dir, and returns the
// components URL.
func coreRepository(t *testing.T, dir string) (version, url string) {
	t.Helper()
	g := NewWithT(t)
	capi, err := envtest.ClusterAPIModule()
	g.Expect(err).NotTo(HaveOccurred())
	opts := krusty.MakeDefaultOptions()
	opts.Reorder = krusty.ReorderOptionLegacy
	res, err := krusty.MakeKustomizer(opts).Run(filesys.MakeFsOnDisk(), filepath.Join(capi.Dir, "core", "config", "default"))
	g.Expect(err).NotTo(HaveOccurred())
	components, err := res.AsYaml()
	g.Expect(err).NotTo(HaveOccurred())
	metadata, err := os.ReadFile(filepath.Join(capi.Dir, "metadata.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	vdir := filepath.Join(dir, "cluster-api", capi.Version)
	g.Expect(os.MkdirAll(vdir, 0o755)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(vdir, "core-components.yaml"), components, 0o644)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(vdir, "metadata.yaml"), metadata, 0o644)).To(Succeed())
	return capi.Version, "file://" + filepath.ToSlash(filepath.Join(vdir, "core-components.yaml"))
}

// TestClusterctlInitAndDelete installs Cluster API core and the three
// providers with clusterctl's Init into an apiserver of its own, offline,
// then deletes one provider type with its CRDs and namespace: the other two
// keep theirs.
func TestClusterctlInitAndDelete(t *testing.T) {
	ctx := context.Background()
	g := NewWithT(t)
	scheme, err := envtest.NewScheme()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(clusterctlv1.AddToScheme(scheme)).To(Succeed())
	mgmt, err := envtest.Start(ctx, envtest.Options{Scheme: scheme, CRDDirectoryPaths: []string{certManagerCRDs}})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { g.Expect(mgmt.Stop()).To(Succeed()) })
	kubeconfig := clusterctl.Kubeconfig{Path: filepath.Join(t.TempDir(), "kubeconfig")}
	g.Expect(mgmt.WriteKubeconfig(kubeconfig.Path)).To(Succeed())

	// Our clusterctl.yaml plus Cluster API core from the module cache.
	dir := t.TempDir()
	g.Expect(bundle.Write(dir, bundle.Options{Version: testVersion})).To(Succeed())
	coreVersion, coreURL := coreRepository(t, dir)
	config, err := os.ReadFile(filepath.Join(dir, bundle.ClusterctlConfigFile))
	g.Expect(err).NotTo(HaveOccurred())
	config = fmt.Appendf(config, "- name: cluster-api\n  type: CoreProvider\n  url: %s\n", coreURL)
	g.Expect(os.WriteFile(filepath.Join(dir, bundle.ClusterctlConfigFile), config, 0o644)).To(Succeed())
	c, err := clusterctl.New(ctx, filepath.Join(dir, bundle.ClusterctlConfigFile))
	g.Expect(err).NotTo(HaveOccurred())

	monolith := bundle.ProviderName + ":" + testVersion
	installed, err := c.Init(ctx, clusterctl.InitOptions{
		Kubeconfig:                kubeconfig,
		CoreProvider:              "cluster-api:" + coreVersion,
		BootstrapProviders:        []string{clusterctl.NoopProvider},
		ControlPlaneProviders:     []string{clusterctl.NoopProvider},
		InfrastructureProviders:   []string{monolith},
		IPAMProviders:             []string{monolith},
		RuntimeExtensionProviders: []string{monolith},
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(installed).To(HaveLen(4))

	inventory := func(g Gomega) []string {
		list := &clusterctlv1.ProviderList{}
		g.Expect(mgmt.Client.List(ctx, list)).To(Succeed())
		var out []string
		for _, p := range list.Items {
			out = append(out, p.Namespace+"/"+p.Name+"@"+p.Version)
		}
		return out
	}
	g.Expect(inventory(g)).To(ConsistOf(
		"capi-system/cluster-api@"+coreVersion,
		"capi-monolith-infrastructure/infrastructure-monolith@"+testVersion,
		"capi-monolith-ipam/ipam-monolith@"+testVersion,
		"capi-monolith-runtime-extension/runtime-extension-monolith@"+testVersion,
	))
	for _, p := range bundle.Providers {
		ns := "capi-monolith-" + p.Overlay
		d := &appsv1.Deployment{}
		g.Expect(mgmt.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "capi-monolith-" + p.Overlay + "-manager"}, d)).To(Succeed())
		g.Expect(d.Spec.Template.Spec.Containers[0].Name).To(Equal("manager"))
		g.Expect(d.Labels).To(HaveKeyWithValue("cluster.x-k8s.io/provider", p.Label))
	}
	crdOwner := func(name string) (string, error) {
		c := &apiextensionsv1.CustomResourceDefinition{}
		if err := mgmt.Client.Get(ctx, client.ObjectKey{Name: name}, c); err != nil {
			return "", err
		}
		if c.DeletionTimestamp != nil {
			return "", apierrors.NewNotFound(apiextensionsv1.Resource("customresourcedefinitions"), name)
		}
		return c.Labels["cluster.x-k8s.io/provider"], nil
	}
	const (
		infraCRD = "monolithclusters.infrastructure.cluster.x-k8s.io"
		ipamCRD  = "monolithippools.ipam.cluster.x-k8s.io"
	)
	g.Expect(crdOwner(infraCRD)).To(Equal("infrastructure-monolith"))
	g.Expect(crdOwner(ipamCRD)).To(Equal("ipam-monolith"))

	// Delete the IPAM provider, CRDs and namespace included.
	g.Expect(c.Delete(ctx, clusterctl.DeleteOptions{
		Kubeconfig:       kubeconfig,
		IPAMProviders:    []string{bundle.ProviderName},
		IncludeCRDs:      true,
		IncludeNamespace: true,
	})).To(Succeed())
	g.Eventually(func() error { _, err := crdOwner(ipamCRD); return err }, timeout).Should(Satisfy(apierrors.IsNotFound))
	g.Expect(crdOwner(infraCRD)).To(Equal("infrastructure-monolith"))
	// The namespace goes with everything in it (envtest runs no namespace
	// controller: it stays terminating, inventory entry included).
	ipamNS := &corev1.Namespace{}
	g.Expect(mgmt.Client.Get(ctx, client.ObjectKey{Name: "capi-monolith-ipam"}, ipamNS)).To(Succeed())
	g.Expect(ipamNS.DeletionTimestamp).NotTo(BeNil())
	// clusterctl deletes cluster-wide RBAC only when its name starts with
	// the provider's namespace and a dash: our name prefixes do.
	for _, name := range []string{"capi-monolith-ipam-manager-shared", "capi-monolith-ipam-capi-monolith-ipam-manager"} {
		g.Expect(mgmt.Client.Get(ctx, client.ObjectKey{Name: name}, &rbacv1.ClusterRole{})).To(Satisfy(apierrors.IsNotFound), name)
		g.Expect(mgmt.Client.Get(ctx, client.ObjectKey{Name: name}, &rbacv1.ClusterRoleBinding{})).To(Satisfy(apierrors.IsNotFound), name)
	}
	g.Expect(mgmt.Client.Get(ctx, client.ObjectKey{Name: "capi-monolith-ipam-ipam-validating-webhook-configuration"},
		&admissionregistrationv1.ValidatingWebhookConfiguration{})).To(Satisfy(apierrors.IsNotFound))
	g.Expect(inventory(g)).To(ContainElements(
		"capi-system/cluster-api@"+coreVersion,
		"capi-monolith-infrastructure/infrastructure-monolith@"+testVersion,
		"capi-monolith-runtime-extension/runtime-extension-monolith@"+testVersion,
	))
	// The other two are untouched.
	for _, p := range []bundle.Provider{bundle.Providers[0], bundle.Providers[2]} {
		ns := &corev1.Namespace{}
		g.Expect(mgmt.Client.Get(ctx, client.ObjectKey{Name: "capi-monolith-" + p.Overlay}, ns)).To(Succeed())
		g.Expect(ns.DeletionTimestamp).To(BeNil())
		g.Expect(mgmt.Client.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "capi-monolith-" + p.Overlay + "-manager"}, &appsv1.Deployment{})).To(Succeed())
		g.Expect(mgmt.Client.Get(ctx, client.ObjectKey{Name: "capi-monolith-" + p.Overlay + "-manager-shared"}, &rbacv1.ClusterRole{})).To(Succeed())
	}
	g.Expect(mgmt.Client.Get(ctx, client.ObjectKey{Name: "capi-monolith-infrastructure-infra-validating-webhook-configuration"},
		&admissionregistrationv1.ValidatingWebhookConfiguration{})).To(Succeed())
}
