package clusterctl_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/spf13/pflag"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/component-base/logs"
	logsv1 "k8s.io/component-base/logs/api/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	clusterctl "sigs.k8s.io/cluster-api/cmd/clusterctl/client"

	"github.com/capi-monolith/capi-monolith/infra"
	"github.com/capi-monolith/capi-monolith/ipam"
	"github.com/capi-monolith/capi-monolith/kustomize/bundle"
	"github.com/capi-monolith/capi-monolith/machinepool"
	"github.com/capi-monolith/capi-monolith/manager"
	"github.com/capi-monolith/capi-monolith/runtimeext"
	"github.com/capi-monolith/capi-monolith/test/capicore"
	"github.com/capi-monolith/capi-monolith/test/envtest"
)

const (
	oldVersion = "v0.1.0"
	newVersion = "v0.2.0"
	// certManagerCRDs stand in for cert-manager, so that clusterctl skips it.
	certManagerCRDs = "../../kustomize/bundle/testdata/cert-manager-crds.yaml"
	timeout         = 60 * time.Second
	providerLabel   = "cluster.x-k8s.io/provider"
)

// coreRepository writes Cluster API core's provider repository for the
// pinned version under dir and returns the version and components URL.
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

// TestInitUpgradeFromAnOlderMinorAndDelete installs core and the three
// providers at v0.1.0 with clusterctl, upgrades them to v0.2.0 (the newest
// metadata.yaml must list v0.1), lets the runtime-extension Deployment
// register itself, then uninstalls with clusterctl delete alone: the
// ExtensionConfig's owner goes with the provider (so the garbage collector
// removes it), nothing of ours is left, and Cluster API core, started again,
// runs.
func TestInitUpgradeFromAnOlderMinorAndDelete(t *testing.T) {
	ctx := t.Context()
	g := NewWithT(t)
	scheme, err := envtest.NewScheme()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(clusterctlv1.AddToScheme(scheme)).To(Succeed())
	g.Expect(runtimev1.AddToScheme(scheme)).To(Succeed())
	mgmt, err := envtest.Start(ctx, envtest.Options{Scheme: scheme, CRDDirectoryPaths: []string{certManagerCRDs}})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { NewWithT(t).Expect(mgmt.Stop()).To(Succeed()) })
	kubeconfig := clusterctl.Kubeconfig{Path: filepath.Join(t.TempDir(), "kubeconfig")}
	g.Expect(mgmt.WriteKubeconfig(kubeconfig.Path)).To(Succeed())

	// Both releases in one repository, as a user who wrote each in turn
	// for the images make image built (VERSION=v0.1.0, then v0.2.0).
	dir := t.TempDir()
	g.Expect(bundle.Write(dir, bundle.Options{Version: oldVersion, Image: "capi-monolith:" + oldVersion})).To(Succeed())
	g.Expect(bundle.Write(dir, bundle.Options{Version: newVersion, Image: "capi-monolith:" + newVersion})).To(Succeed())
	coreVersion, coreURL := coreRepository(t, dir)
	configPath := filepath.Join(dir, bundle.ClusterctlConfigFile)
	config, err := os.ReadFile(configPath)
	g.Expect(err).NotTo(HaveOccurred())
	config = fmt.Appendf(config, "- name: cluster-api\n  type: CoreProvider\n  url: %s\n", coreURL)
	g.Expect(os.WriteFile(configPath, config, 0o644)).To(Succeed())
	c, err := clusterctl.New(ctx, configPath)
	g.Expect(err).NotTo(HaveOccurred())

	old := bundle.ProviderName + ":" + oldVersion
	_, err = c.Init(ctx, clusterctl.InitOptions{
		Kubeconfig:                kubeconfig,
		CoreProvider:              "cluster-api:" + coreVersion,
		BootstrapProviders:        []string{clusterctl.NoopProvider},
		ControlPlaneProviders:     []string{clusterctl.NoopProvider},
		InfrastructureProviders:   []string{old},
		IPAMProviders:             []string{old},
		RuntimeExtensionProviders: []string{old},
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(inventory(ctx, g, mgmt)).To(ConsistOf(
		"capi-system/cluster-api@"+coreVersion,
		"capi-monolith-infrastructure/infrastructure-monolith@"+oldVersion,
		"capi-monolith-ipam/ipam-monolith@"+oldVersion,
		"capi-monolith-runtime-extension/runtime-extension-monolith@"+oldVersion,
	))
	g.Expect(managerImages(ctx, g, mgmt)).To(HaveEach("docker.io/library/capi-monolith:" + oldVersion))

	// clusterctl offers the upgrade (it reads v0.2.0's metadata.yaml and
	// finds v0.1's series there), and applies it.
	plans, err := c.PlanUpgrade(ctx, clusterctl.PlanUpgradeOptions{Kubeconfig: kubeconfig})
	g.Expect(err).NotTo(HaveOccurred())
	var nextVersions []string
	for _, plan := range plans {
		for _, p := range plan.Providers {
			if strings.HasSuffix(p.ManifestLabel(), "-"+bundle.ProviderName) {
				nextVersions = append(nextVersions, p.Name+"@"+p.NextVersion)
			}
		}
	}
	g.Expect(nextVersions).To(ConsistOf(
		"infrastructure-monolith@"+newVersion, "ipam-monolith@"+newVersion, "runtime-extension-monolith@"+newVersion))
	g.Expect(c.ApplyUpgrade(ctx, clusterctl.ApplyUpgradeOptions{
		Kubeconfig:                kubeconfig,
		InfrastructureProviders:   []string{"capi-monolith-infrastructure/" + bundle.ProviderName + ":" + newVersion},
		IPAMProviders:             []string{"capi-monolith-ipam/" + bundle.ProviderName + ":" + newVersion},
		RuntimeExtensionProviders: []string{"capi-monolith-runtime-extension/" + bundle.ProviderName + ":" + newVersion},
	})).To(Succeed())
	g.Expect(inventory(ctx, g, mgmt)).To(ConsistOf(
		"capi-system/cluster-api@"+coreVersion,
		"capi-monolith-infrastructure/infrastructure-monolith@"+newVersion,
		"capi-monolith-ipam/ipam-monolith@"+newVersion,
		"capi-monolith-runtime-extension/runtime-extension-monolith@"+newVersion,
	))
	g.Expect(managerImages(ctx, g, mgmt)).To(HaveEach("docker.io/library/capi-monolith:" + newVersion))

	// Cluster API core runs (its own webhooks, not the uninstalled
	// Deployment's). The runtime-extension Deployment registers the
	// extension at start-up; envtest runs no Deployment, so the test does
	// what its args say, with its ServiceAccount's rights.
	removeWebhookConfigurationsOf(ctx, g, mgmt, "cluster-api")
	core, err := capicore.Start(ctx, capicore.Options{Config: mgmt.Config})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = core.Stop() })
	ec := registerAsTheDeployment(ctx, t, mgmt)
	g.Expect(ec.Name).To(Equal("monolith"))
	g.Expect(ec.Labels).To(HaveKeyWithValue(providerLabel, "runtime-extension-monolith"))
	g.Expect(ec.Labels).To(HaveKeyWithValue(clusterctlv1.ClusterctlLabel, ""))
	g.Expect(ec.OwnerReferences).NotTo(BeEmpty())

	// One provider per call, as `clusterctl delete --infrastructure
	// monolith --include-crd` and so on: clusterctl lists every kind it
	// discovered once per call, and a kind whose CRD the same call deleted
	// fails its listing. For the same reason the next call waits until
	// discovery no longer serves the kinds of the CRDs this one deleted.
	for _, del := range []struct {
		label string
		opts  clusterctl.DeleteOptions
	}{
		{"infrastructure-monolith", clusterctl.DeleteOptions{InfrastructureProviders: []string{bundle.ProviderName}}},
		{"ipam-monolith", clusterctl.DeleteOptions{IPAMProviders: []string{bundle.ProviderName}}},
		{"runtime-extension-monolith", clusterctl.DeleteOptions{RuntimeExtensionProviders: []string{bundle.ProviderName}}},
	} {
		kinds, err := envtest.ProviderKinds(ctx, mgmt.Client, del.label)
		g.Expect(err).NotTo(HaveOccurred())
		opts := del.opts
		opts.Kubeconfig, opts.IncludeCRDs, opts.IncludeNamespace = kubeconfig, true, true
		c, err := clusterctl.New(ctx, configPath)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(c.Delete(ctx, opts)).To(Succeed())
		g.Eventually(func() error {
			return envtest.ProviderGone(ctx, mgmt.Config, mgmt.Client, del.label, kinds)
		}, time.Minute).Should(Succeed())
	}

	// No manual step: every owner of the ExtensionConfig went with the
	// provider. envtest runs no garbage collector: the test collects it as
	// Kubernetes' would (core, still running, removes its finalizer).
	collectGarbage(ctx, g, mgmt, ec)

	// Nothing of ours: no ExtensionConfig, no CRD, cluster-wide RBAC or
	// webhook configuration labelled with our providers (namespaced
	// objects go with their namespaces, which envtest leaves terminating).
	ours, err := labels.Parse(providerLabel + " in (infrastructure-monolith,ipam-monolith,runtime-extension-monolith)")
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) {
		ecs := &runtimev1.ExtensionConfigList{}
		g.Expect(mgmt.Client.List(ctx, ecs)).To(Succeed())
		g.Expect(ecs.Items).To(BeEmpty())
		for _, list := range []client.ObjectList{
			&apiextensionsv1.CustomResourceDefinitionList{}, &rbacv1.ClusterRoleList{}, &rbacv1.ClusterRoleBindingList{},
			&admissionregistrationv1.ValidatingWebhookConfigurationList{}, &admissionregistrationv1.MutatingWebhookConfigurationList{},
		} {
			g.Expect(mgmt.Client.List(ctx, list, client.MatchingLabelsSelector{Selector: ours})).To(Succeed())
			g.Expect(list).To(HaveField("Items", BeEmpty()), "%T", list)
		}
	}, timeout).Should(Succeed())
	g.Expect(inventory(ctx, g, mgmt)).To(ContainElement("capi-system/cluster-api@" + coreVersion))

	// Core, restarted after the uninstall (its registry warms up from the
	// ExtensionConfigs there are), becomes ready and keeps running.
	g.Expect(core.Stop()).To(Succeed())
	core, err = capicore.Start(ctx, capicore.Options{Config: mgmt.Config})
	g.Expect(err).NotTo(HaveOccurred(), "core starts after the uninstall")
	select {
	case <-core.Exited():
		t.Fatalf("core exited after the uninstall: %v\n%s", core.Err(), core.Output())
	default:
	}
}

// registerAsTheDeployment registers the runtime extension as the installed
// runtime-extension Deployment does at start-up: its args parsed with the
// binary's flags, in its namespace, as its ServiceAccount (so its RBAC
// must allow it), against core's ExtensionConfig webhooks.
func registerAsTheDeployment(ctx context.Context, t *testing.T, mgmt *envtest.Environment) *runtimev1.ExtensionConfig {
	t.Helper()
	g := NewWithT(t)
	ns := "capi-monolith-runtime-extension"
	d := &appsv1.Deployment{}
	g.Expect(mgmt.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: ns + "-manager"}, d)).To(Succeed())
	fs := pflag.NewFlagSet("capi-monolith", pflag.ContinueOnError)
	var mopts manager.Options
	manager.BindFlags(fs, &mopts, []string{infra.Name, machinepool.Name, ipam.Name, runtimeext.Name})
	infraOpts, poolOpts, ipamOpts, ext := infra.DefaultOptions(), machinepool.DefaultOptions(), ipam.DefaultOptions(), runtimeext.DefaultOptions()
	infraOpts.BindFlags(fs)
	poolOpts.BindFlags(fs)
	ipamOpts.BindFlags(fs)
	ext.BindFlags(fs)
	logsv1.AddFlags(logs.NewOptions(), fs)
	g.Expect(fs.Parse(d.Spec.Template.Spec.Containers[0].Args)).To(Succeed())
	g.Expect(ext.SelfRegister).To(BeTrue(), "the Deployment registers itself")

	cfg := rest.CopyConfig(mgmt.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":" + d.Spec.Template.Spec.ServiceAccountName}
	sa, err := client.New(cfg, client.Options{Scheme: mgmt.Client.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())
	// Core's webhooks may take a moment to serve after its start.
	g.Eventually(func() error { return ext.Register(ctx, sa, ns) }, timeout).Should(Succeed())
	ec := &runtimev1.ExtensionConfig{}
	g.Expect(mgmt.Client.Get(ctx, client.ObjectKey{Name: ext.Registration.Name}, ec)).To(Succeed())
	return ec
}

// collectGarbage deletes ec once none of its owners exists any more (no
// object of the owner's kind and name with the owner's UID), as Kubernetes'
// garbage collector does, and waits until it is gone.
func collectGarbage(ctx context.Context, g Gomega, mgmt *envtest.Environment, ec *runtimev1.ExtensionConfig) {
	for _, ref := range ec.OwnerReferences {
		gv, err := schema.ParseGroupVersion(ref.APIVersion)
		g.Expect(err).NotTo(HaveOccurred())
		owner := &unstructured.Unstructured{}
		owner.SetGroupVersionKind(gv.WithKind(ref.Kind))
		err = mgmt.Client.Get(ctx, client.ObjectKey{Name: ref.Name}, owner)
		if err == nil {
			g.Expect(owner.GetUID()).NotTo(Equal(ref.UID), "%s %s, owner of ExtensionConfig %s, is still there", ref.Kind, ref.Name, ec.Name)
		} else {
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%v", err)
		}
	}
	g.Expect(client.IgnoreNotFound(mgmt.Client.Delete(ctx, ec))).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(ec), &runtimev1.ExtensionConfig{}))
	}, timeout).Should(BeTrue())
}

func inventory(ctx context.Context, g Gomega, mgmt *envtest.Environment) []string {
	list := &clusterctlv1.ProviderList{}
	g.Expect(mgmt.Client.List(ctx, list)).To(Succeed())
	var out []string
	for _, p := range list.Items {
		out = append(out, p.Namespace+"/"+p.Name+"@"+p.Version)
	}
	return out
}

// managerImages are the images of our three Deployments.
func managerImages(ctx context.Context, g Gomega, mgmt *envtest.Environment) []string {
	var out []string
	for _, p := range bundle.Providers {
		d := &appsv1.Deployment{}
		ns := "capi-monolith-" + p.Overlay
		g.Expect(mgmt.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: ns + "-manager"}, d)).To(Succeed())
		out = append(out, d.Spec.Template.Spec.Containers[0].Image)
	}
	return out
}

// removeWebhookConfigurationsOf deletes the webhook configurations a
// provider's components installed: envtest runs no Deployment to serve
// them (capicore.Start installs its own for the process it runs).
func removeWebhookConfigurationsOf(ctx context.Context, g Gomega, mgmt *envtest.Environment, provider string) {
	sel := client.MatchingLabels{providerLabel: provider}
	g.Expect(mgmt.Client.DeleteAllOf(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{}, sel)).To(Succeed())
	g.Expect(mgmt.Client.DeleteAllOf(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{}, sel)).To(Succeed())
}
