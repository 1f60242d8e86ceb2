package podbypod_test

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/moby/moby/client"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	clusterctl "sigs.k8s.io/cluster-api/cmd/clusterctl/client"

	"github.com/capi-monolith/capi-monolith/dev/controllermanager"
	"github.com/capi-monolith/capi-monolith/kustomize/bundle"
	"github.com/capi-monolith/capi-monolith/test/envtest"
)

const (
	ourVersion      = "v0.1.0"
	certManagerCRDs = "../../kustomize/bundle/testdata/cert-manager-crds.yaml"
	providerLabel   = "cluster.x-k8s.io/provider"
	infraNamespace  = "capi-monolith-infrastructure"
	clusterNS       = "podbypod"
	timeout         = 60 * time.Second
	clusterTimeout  = 5 * time.Minute
)

func TestMain(m *testing.M) {
	ctrl.SetLogger(envtest.TestLogger())
	os.Exit(m.Run())
}

// capiImages are the pinned Cluster API managers, by the image name their
// components give and the variable naming the cached binary.
var capiImages = []struct{ provider, name, env string }{
	{"cluster-api", "cluster-api-controller", "CAPI_CORE_MANAGER"},
	{"bootstrap-kubeadm", "kubeadm-bootstrap-controller", "CAPI_KUBEADM_BOOTSTRAP_MANAGER"},
	{"control-plane-kubeadm", "kubeadm-control-plane-controller", "CAPI_KUBEADM_CONTROL_PLANE_MANAGER"},
}

// flavors are the workload clusters the test makes, one of each flavor of
// our bundle ("" is cluster-template.yaml) by the Cluster's name: the ipam
// flavor carries its MonolithIPPool, clusterctl adds the topology flavor's
// ClusterClass.
var flavors = []struct{ name, flavor string }{
	{"podbypod", ""},
	{"podbypod-ipam", "ipam"},
	{"podbypod-machinepool", "machinepool"},
	{"podbypod-topology", "topology"},
}

// TestTheBundlesRunPodByPod installs Cluster API core, the kubeadm
// providers and ours with clusterctl into a kube-apiserver on a Docker
// network, runs every Deployment as containers, brings a cluster of each of
// the default, ipam, machinepool and topology flavors to Available, kills
// our leader, restarts it with another IP, and uninstalls everything with
// clusterctl delete.
func TestTheBundlesRunPodByPod(t *testing.T) {
	ctx := t.Context()
	g := NewWithT(t)
	image := os.Getenv("CAPI_MONOLITH_TEST_IMAGE")
	if image == "" {
		image = "capi-monolith:dev"
	}
	assets, err := envtest.BinaryAssetsDirectory()
	g.Expect(err).NotTo(HaveOccurred())
	capi, err := envtest.ClusterAPIModule()
	g.Expect(err).NotTo(HaveOccurred())

	dc, err := client.New(client.FromEnv, client.WithAPIVersionNegotiation())
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = dc.Close() })
	_, err = dc.ImageInspect(ctx, image)
	g.Expect(err).NotTo(HaveOccurred(), "the image %s is missing (make image)", image)
	runID := make([]byte, 4)
	_, _ = rand.Read(runID)
	d := &docker{c: dc, run: hex.EncodeToString(runID)}
	t.Cleanup(func() {
		ctx := context.Background()
		g := NewWithT(t)
		g.Expect(d.removeAll(ctx)).To(Succeed())
		g.Expect(d.leftovers(ctx)).To(BeEmpty(), "the harness leaves nothing in Docker")
	})
	dir := t.TempDir()
	g.Expect(os.Chmod(dir, 0o755)).To(Succeed())

	// Images, FROM scratch, from the cached static binaries.
	start := time.Now()
	repo := "capi-monolith-podbypod-" + d.run
	pause := repo + "/pause:v1"
	g.Expect(d.buildImage(ctx, pause, []string{"/pause"}, imageFile{buildPause(t, dir), "/pause", 0o755})).To(Succeed())
	cpImage := repo + "/control-plane:" + envtest.KubernetesVersion
	g.Expect(d.buildImage(ctx, cpImage, []string{"/kube-apiserver"},
		imageFile{filepath.Join(assets, "etcd"), "/etcd", 0o755},
		imageFile{filepath.Join(assets, "kube-apiserver"), "/kube-apiserver", 0o755})).To(Succeed())
	for _, ci := range capiImages {
		bin := os.Getenv(ci.env)
		g.Expect(bin).NotTo(BeEmpty(), "%s names the cached manager (make capi-managers)", ci.env)
		g.Expect(d.buildImage(ctx, repo+"/"+ci.name+":"+capi.Version, []string{"/manager"}, imageFile{bin, "/manager", 0o755})).To(Succeed())
	}
	t.Logf("images built in %s", time.Since(start).Round(time.Millisecond))

	// The network and the control plane pod.
	netName := "capi-monolith-podbypod-" + d.run
	_, err = dc.NetworkCreate(ctx, netName, client.NetworkCreateOptions{Driver: "bridge", Labels: d.labels()})
	g.Expect(err).NotTo(HaveOccurred())
	cp, err := d.startControlPlane(ctx, dir, netName, pause, cpImage)
	g.Expect(err).NotTo(HaveOccurred())
	scheme, err := envtest.NewScheme()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(clusterctlv1.AddToScheme(scheme)).To(Succeed())
	c, err := crclient.New(cp.config, crclient.Options{Scheme: scheme})
	g.Expect(err).NotTo(HaveOccurred())
	cs, err := kubernetes.NewForConfig(cp.config)
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() error {
		_, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err
	}, timeout).Should(Succeed(), "kube-apiserver becomes ready")
	kcm, err := controllermanager.Start(ctx, controllermanager.Options{
		BinaryPath: filepath.Join(assets, controllermanager.BinaryName), Config: cp.config, WorkDir: filepath.Join(dir, "kcm"),
		// The kubeadm control plane provider's ServiceAccount is bound to
		// an aggregated ClusterRole.
		Controllers: append([]string{"clusterrole-aggregation-controller"}, controllermanager.Controllers...),
	})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = kcm.Stop() })
	// cert-manager's CRDs stand in for it: clusterctl skips installing it.
	applyFile(ctx, g, c, certManagerCRDs)

	// The repositories and clusterctl's configuration, as a user writes
	// them: ours from bundle.Write, the kubeadm providers and core from the
	// pinned module, their images overridden to the ones built above.
	repoDir := filepath.Join(dir, "repository")
	g.Expect(bundle.Write(repoDir, bundle.Options{Version: ourVersion, Image: image})).To(Succeed())
	configPath := filepath.Join(repoDir, bundle.ClusterctlConfigFile)
	config, err := os.ReadFile(configPath)
	g.Expect(err).NotTo(HaveOccurred())
	for _, p := range []struct{ name, typ, label, config, file string }{
		{"cluster-api", "CoreProvider", "cluster-api", "core", "core-components.yaml"},
		{"kubeadm", "BootstrapProvider", "bootstrap-kubeadm", "bootstrap/kubeadm", "bootstrap-components.yaml"},
		{"kubeadm", "ControlPlaneProvider", "control-plane-kubeadm", "controlplane/kubeadm", "control-plane-components.yaml"},
	} {
		url := writeCAPIRepository(g, capi.Dir, capi.Version, filepath.Join(repoDir, p.label, capi.Version), p.config, p.file)
		config = fmt.Appendf(config, "- name: %s\n  type: %s\n  url: %s\n", p.name, p.typ, url)
	}
	config = append(config, "images:\n"...)
	for _, ci := range capiImages {
		config = fmt.Appendf(config, "  %s:\n    repository: %s\n    tag: %s\n", ci.provider, repo, capi.Version)
	}
	g.Expect(os.WriteFile(configPath, config, 0o644)).To(Succeed())
	t.Setenv("CLUSTER_TOPOLOGY", "true")
	t.Setenv("EXP_RUNTIME_SDK", "true")
	kubeconfig := clusterctl.Kubeconfig{Path: filepath.Join(dir, "kubeconfig")}
	g.Expect(writeKubeconfig(cp.config, kubeconfig.Path)).To(Succeed())
	cc, err := clusterctl.New(ctx, configPath)
	g.Expect(err).NotTo(HaveOccurred())

	start = time.Now()
	ours := bundle.ProviderName + ":" + ourVersion
	_, err = cc.Init(ctx, clusterctl.InitOptions{
		Kubeconfig:                kubeconfig,
		CoreProvider:              "cluster-api:" + capi.Version,
		BootstrapProviders:        []string{"kubeadm:" + capi.Version},
		ControlPlaneProviders:     []string{"kubeadm:" + capi.Version},
		InfrastructureProviders:   []string{ours},
		IPAMProviders:             []string{ours},
		RuntimeExtensionProviders: []string{ours},
	})
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("clusterctl init in %s", time.Since(start).Round(time.Millisecond))
	// It re-reads and rewrites every object, so a write that lost a race
	// with the apiserver's own CRD status updates is simply played again.
	g.Eventually(func() error { return playCertManager(ctx, c, cp.ca) }).WithTimeout(30 * time.Second).Should(Succeed())

	// The kubelet: every Deployment's replicas as containers.
	kl := &kubelet{d: d, c: c, network: netName, pause: pause, cp: cp, dir: dir}
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range kl.pods {
				for _, id := range p.containers {
					t.Logf("== %s/%s\n%s", p.namespace, p.name, d.logs(context.Background(), id))
				}
			}
		}
	})
	start = time.Now()
	g.Expect(kl.sync(ctx)).To(Succeed())
	g.Expect(kl.podsOf(infraNamespace)).To(HaveLen(2), "our infrastructure Deployment runs two replicas")
	g.Expect(kl.pods).To(HaveLen(2+5), "core, kubeadm bootstrap and control plane, ipam and runtime-extension once each")
	g.Eventually(func(g Gomega) {
		g.Expect(kl.notRunning(ctx)).To(BeEmpty())
		ec := &unstructured.Unstructured{}
		ec.SetGroupVersionKind(schema.GroupVersionKind{Group: "runtime.cluster.x-k8s.io", Version: "v1beta2", Kind: "ExtensionConfig"})
		g.Expect(c.Get(ctx, crclient.ObjectKey{Name: "monolith"}, ec)).To(Succeed(), "the runtime extension registered itself")
	}, 2*timeout).Should(Succeed())
	t.Logf("every provider running in %s", time.Since(start).Round(time.Millisecond))

	// A cluster of each flavor, from our bundle's templates, created
	// together and awaited together.
	g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: clusterNS}})).To(Succeed())
	var objs []unstructured.Unstructured
	for _, f := range flavors {
		tmpl, err := cc.GetClusterTemplate(ctx, clusterctl.GetClusterTemplateOptions{
			Kubeconfig:               kubeconfig,
			ProviderRepositorySource: &clusterctl.ProviderRepositorySourceOptions{InfrastructureProvider: ours, Flavor: f.flavor},
			ClusterName:              f.name,
			TargetNamespace:          clusterNS,
			KubernetesVersion:        "v1.36.0",
			ControlPlaneMachineCount: ptr.To[int64](1),
			WorkerMachineCount:       ptr.To[int64](1),
		})
		g.Expect(err).NotTo(HaveOccurred(), "flavor %q", f.flavor)
		objs = append(objs, tmpl.Objs()...)
	}
	// The Clusters last: a topology Cluster is admitted only once its
	// ClusterClass exists.
	slices.SortStableFunc(objs, func(a, b unstructured.Unstructured) int {
		return cmp.Compare(btoi(a.GetKind() == "Cluster"), btoi(b.GetKind() == "Cluster"))
	})
	start = time.Now()
	created := start
	for _, o := range objs {
		g.Eventually(func() error { return c.Create(ctx, &o) }, timeout).Should(Succeed(), "%s %s", o.GetKind(), o.GetName())
	}
	g.Eventually(func(g Gomega) {
		g.Expect(kl.notRunning(ctx)).To(BeEmpty())
		for _, f := range flavors {
			g.Expect(clusterAvailable(ctx, c, f.name)).To(Succeed(), "flavor %q", f.flavor)
		}
	}, clusterTimeout, time.Second).Should(Succeed())
	t.Logf("every flavor Available in %s", time.Since(start).Round(time.Millisecond))
	for _, f := range flavors {
		t.Logf("flavor %q Available %s after its objects were created", f.flavor, availableSince(ctx, g, c, f.name).Sub(created).Round(time.Second))
	}

	// Their workload APIs, dialled at our pods' IPs under the advertised
	// name.
	cms := map[string]*corev1.ConfigMap{}
	for _, f := range flavors {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "survivor"}, Data: map[string]string{"k": "v"}}
		g.Eventually(func() error {
			w, err := workloadClient(ctx, c, f.name, kl.podsOf(infraNamespace)[0].ip)
			if err != nil {
				return err
			}
			return w.Create(ctx, cm)
		}, timeout).Should(Succeed(), "flavor %q", f.flavor)
		cms[f.name] = cm
	}
	// servesEveryCluster: the workload API of every cluster answers at ip
	// with the object created before the SIGKILL.
	servesEveryCluster := func(g Gomega, ip string) {
		for _, f := range flavors {
			w, err := workloadClient(ctx, c, f.name, ip)
			g.Expect(err).NotTo(HaveOccurred())
			got := &corev1.ConfigMap{}
			g.Expect(w.Get(ctx, crclient.ObjectKeyFromObject(cms[f.name]), got)).To(Succeed(), "flavor %q at %s", f.flavor, ip)
			g.Expect(got.UID).To(Equal(cms[f.name].UID), "flavor %q at %s", f.flavor, ip)
		}
	}

	// SIGKILL our leader: the other replica serves every object again.
	leader := kl.leader(ctx, g)
	killedIP := leader.ip
	start = time.Now()
	killedAt := start
	g.Expect(kl.kill(ctx, leader)).To(Succeed())
	survivor := kl.podsOf(infraNamespace)[0]
	g.Eventually(func(g Gomega) { servesEveryCluster(g, survivor.ip) }, timeout, 100*time.Millisecond).Should(Succeed())
	t.Logf("failover: every workload API answered with every object %s after the leader's SIGKILL", time.Since(start).Round(10*time.Millisecond))

	// The killed pod comes back, with another IP: the clusters stay
	// Available, their workload APIs answer at the new IP. Docker hands out
	// the lowest free address, the killed pod's: a placeholder holds it
	// while the replacement starts, as a rescheduled pod gets another IP.
	placeholder, held, err := d.startSandbox(ctx, sandboxOptions{
		name: "capi-monolith-podbypod-" + d.run + "-placeholder", image: pause, network: netName,
	})
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("the killed pod's IP %s is held by a placeholder (%s)", killedIP, held)
	g.Expect(kl.sync(ctx)).To(Succeed())
	_, err = dc.ContainerRemove(ctx, placeholder, client.ContainerRemoveOptions{Force: true})
	g.Expect(err).NotTo(HaveOccurred())
	pods := kl.podsOf(infraNamespace)
	g.Expect(pods).To(HaveLen(2))
	restarted := pods[1]
	g.Expect(restarted.ip).NotTo(Equal(killedIP), "the restarted pod has another IP")
	g.Eventually(func(g Gomega) {
		g.Expect(kl.notRunning(ctx)).To(BeEmpty())
		servesEveryCluster(g, restarted.ip)
		servesEveryCluster(g, survivor.ip)
	}, timeout).Should(Succeed())
	// Core's view of the workload clusters may lapse while no replica
	// serves (their Machines' nodes unknown for a moment): every cluster
	// is Available again, and the figures say when each last turned so.
	g.Eventually(func(g Gomega) {
		for _, f := range flavors {
			g.Expect(clusterAvailable(ctx, c, f.name)).To(Succeed(), "flavor %q", f.flavor)
		}
	}, clusterTimeout, time.Second).Should(Succeed())
	for _, f := range flavors {
		if since := availableSince(ctx, g, c, f.name).Sub(killedAt).Round(time.Second); since > 0 {
			t.Logf("after the restart flavor %q is Available; its Available condition last changed %s after the SIGKILL", f.flavor, since)
		} else {
			t.Logf("after the restart flavor %q is Available; it stayed so through the SIGKILL (last changed %s before it)", f.flavor, -since)
		}
	}

	// Uninstall: the clusters first, then what the templates made besides
	// (the ClusterClass and its templates, the IP pool: their CRDs go with
	// the providers, which must still be running to release them), then
	// every provider.
	start = time.Now()
	for _, f := range flavors {
		g.Expect(c.Delete(ctx, clusterObject(f.name))).To(Succeed())
	}
	g.Eventually(func(g Gomega) {
		for _, f := range flavors {
			cluster := clusterObject(f.name)
			g.Expect(apierrors.IsNotFound(c.Get(ctx, crclient.ObjectKeyFromObject(cluster), cluster))).To(BeTrue(), "cluster %s is deleted", f.name)
		}
	}, clusterTimeout).Should(Succeed())
	for _, o := range objs {
		g.Expect(crclient.IgnoreNotFound(c.Delete(ctx, &o))).To(Succeed(), "%s %s", o.GetKind(), o.GetName())
	}
	g.Eventually(func(g Gomega) {
		for _, o := range objs {
			g.Expect(apierrors.IsNotFound(c.Get(ctx, crclient.ObjectKeyFromObject(&o), &o))).To(BeTrue(), "%s %s is deleted", o.GetKind(), o.GetName())
		}
	}, timeout).Should(Succeed())
	t.Logf("every cluster and its objects deleted in %s", time.Since(start).Round(time.Millisecond))
	// One provider per call, ours first, core last, as
	// `clusterctl delete --infrastructure monolith --include-crd
	// --include-namespace` and so on: `--all --include-crd` refuses while
	// an object of core's CRDs exists, and the ExtensionConfig our runtime
	// extension registered goes only with it (its owner, a ClusterRole of
	// the provider, is deleted, then the garbage collector removes it).
	ecGVK := schema.GroupVersionKind{Group: "runtime.cluster.x-k8s.io", Version: "v1beta2", Kind: "ExtensionConfigList"}
	for _, del := range []struct {
		label string
		opts  clusterctl.DeleteOptions
	}{
		{"infrastructure-monolith", clusterctl.DeleteOptions{InfrastructureProviders: []string{bundle.ProviderName}}},
		{"ipam-monolith", clusterctl.DeleteOptions{IPAMProviders: []string{bundle.ProviderName}}},
		{"runtime-extension-monolith", clusterctl.DeleteOptions{RuntimeExtensionProviders: []string{bundle.ProviderName}}},
		{"control-plane-kubeadm", clusterctl.DeleteOptions{ControlPlaneProviders: []string{"kubeadm"}}},
		{"bootstrap-kubeadm", clusterctl.DeleteOptions{BootstrapProviders: []string{"kubeadm"}}},
		{"cluster-api", clusterctl.DeleteOptions{CoreProvider: "cluster-api"}},
	} {
		opts := del.opts
		if opts.CoreProvider != "" {
			g.Eventually(func(g Gomega) {
				ecs := &unstructured.UnstructuredList{}
				ecs.SetGroupVersionKind(ecGVK)
				g.Expect(c.List(ctx, ecs)).To(Succeed())
				g.Expect(ecs.Items).To(BeEmpty(), "the ExtensionConfig went with the runtime extension")
			}, timeout).Should(Succeed())
		}
		kinds, err := envtest.ProviderKinds(ctx, c, del.label)
		g.Expect(err).NotTo(HaveOccurred())
		opts.Kubeconfig, opts.IncludeCRDs, opts.IncludeNamespace = kubeconfig, true, true
		cc, err := clusterctl.New(ctx, configPath)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(cc.Delete(ctx, opts)).To(Succeed(), "%+v", opts)
		// The next call lists every kind discovery serves: one whose CRD
		// is terminating, or gone but still served, fails it.
		g.Eventually(func() error {
			return envtest.ProviderGone(ctx, cp.config, c, del.label, kinds)
		}, timeout).Should(Succeed())
	}
	// Nothing of ours is left (Cluster API core's cluster-wide RBAC is not
	// judged here).
	oursSel, err := labels.Parse(providerLabel + " in (infrastructure-monolith,ipam-monolith,runtime-extension-monolith)")
	g.Expect(err).NotTo(HaveOccurred())
	// The garbage collector finishes the Deployments' deletion.
	g.Eventually(func(g Gomega) {
		g.Expect(kl.sync(ctx)).To(Succeed())
		g.Expect(kl.pods).To(BeEmpty(), "no Deployment is left to run")
		g.Expect(kl.proxied).To(BeEmpty(), "no Service is left to proxy")
	}, timeout).Should(Succeed())
	g.Eventually(func(g Gomega) {
		for _, list := range []crclient.ObjectList{
			&apiextensionsv1.CustomResourceDefinitionList{}, &rbacv1.ClusterRoleList{}, &rbacv1.ClusterRoleBindingList{},
			&admissionregistrationv1.ValidatingWebhookConfigurationList{}, &admissionregistrationv1.MutatingWebhookConfigurationList{},
			&corev1.NamespaceList{},
		} {
			g.Expect(c.List(ctx, list, crclient.MatchingLabelsSelector{Selector: oursSel})).To(Succeed())
			g.Expect(list).To(HaveField("Items", BeEmpty()), "%T", list)
		}
		nss := &corev1.NamespaceList{}
		g.Expect(c.List(ctx, nss)).To(Succeed())
		for _, ns := range nss.Items {
			g.Expect(ns.Name).NotTo(Or(HavePrefix("capi-monolith-"), HavePrefix("capi-")), "namespace %s is gone", ns.Name)
		}
		crds := &apiextensionsv1.CustomResourceDefinitionList{}
		g.Expect(c.List(ctx, crds)).To(Succeed())
		for _, crd := range crds.Items {
			// cert-manager's stand-in and clusterctl's inventory may stay.
			g.Expect(crd.Name).To(Or(HaveSuffix(".cert-manager.io"), Equal("providers.clusterctl.cluster.x-k8s.io")), "CRD %s is gone", crd.Name)
		}
	}, 2*timeout).Should(Succeed())
}

// clusterObject is the Cluster name of clusterNS, to get or delete.
func clusterObject(name string) *unstructured.Unstructured {
	cluster := &unstructured.Unstructured{}
	cluster.SetGroupVersionKind(schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "Cluster"})
	cluster.SetNamespace(clusterNS)
	cluster.SetName(name)
	return cluster
}

// availableCondition is the Available condition of the Cluster name, nil
// while it has none.
func availableCondition(ctx context.Context, c crclient.Client, name string) (map[string]any, error) {
	cluster := clusterObject(name)
	if err := c.Get(ctx, crclient.ObjectKeyFromObject(cluster), cluster); err != nil {
		return nil, err
	}
	conds, _, _ := unstructured.NestedSlice(cluster.Object, "status", "conditions")
	for _, cond := range conds {
		if m, _ := cond.(map[string]any); m["type"] == "Available" {
			return m, nil
		}
	}
	return nil, nil
}

// clusterAvailable reports whether the Cluster name's Available condition
// is True.
func clusterAvailable(ctx context.Context, c crclient.Client, name string) error {
	m, err := availableCondition(ctx, c, name)
	switch {
	case err != nil:
		return err
	case m == nil:
		return fmt.Errorf("cluster %s has no Available condition yet", name)
	case m["status"] != "True":
		return fmt.Errorf("cluster %s not Available: %v: %v", name, m["reason"], m["message"])
	}
	return nil
}

// availableSince is the last transition of the Cluster name's Available
// condition.
func availableSince(ctx context.Context, g Gomega, c crclient.Client, name string) time.Time {
	m, err := availableCondition(ctx, c, name)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(m).NotTo(BeNil(), "cluster %s has an Available condition", name)
	ts, _ := m["lastTransitionTime"].(string)
	at, err := time.Parse(time.RFC3339, ts)
	g.Expect(err).NotTo(HaveOccurred())
	return at
}

// workloadClient is a client of the workload API of the Cluster name from
// its kubeconfig Secret, dialled at ip (the name resolves on the network
// only) with the kubeconfig's host as TLS server name.
func workloadClient(ctx context.Context, c crclient.Client, name, ip string) (crclient.Client, error) {
	s := &corev1.Secret{}
	if err := c.Get(ctx, crclient.ObjectKey{Namespace: clusterNS, Name: name + "-kubeconfig"}, s); err != nil {
		return nil, err
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(s.Data["value"])
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, err
	}
	cfg.TLSClientConfig.ServerName = u.Hostname()
	u.Host = net.JoinHostPort(ip, u.Port())
	cfg.Host = u.String()
	cfg.Timeout = 5 * time.Second
	return crclient.New(cfg, crclient.Options{})
}

// podsOf are the running pods of namespace, oldest first.
func (k *kubelet) podsOf(namespace string) []*pod {
	var out []*pod
	for _, p := range k.pods {
		if p.namespace == namespace {
			out = append(out, p)
		}
	}
	return out
}

// leader is our infrastructure pod whose address the workload leader Lease
// holds.
func (k *kubelet) leader(ctx context.Context, g Gomega) *pod {
	var leader *pod
	g.Eventually(func(g Gomega) {
		lease := &coordinationv1.Lease{}
		g.Expect(k.c.Get(ctx, crclient.ObjectKey{Namespace: infraNamespace, Name: infraNamespace + "-workload-leader"}, lease)).To(Succeed())
		holder := ptr.Deref(lease.Spec.HolderIdentity, "")
		if h, _, err := net.SplitHostPort(holder); err == nil {
			holder = h
		}
		leader = nil
		for _, p := range k.podsOf(infraNamespace) {
			if p.ip == holder {
				leader = p
			}
		}
		g.Expect(leader).NotTo(BeNil(), "the leader %q is one of our pods", holder)
	}, timeout).Should(Succeed())
	return leader
}

// writeCAPIRepository builds a Cluster API provider's config/default from
// the pinned module into a clusterctl local repository folder and returns
// its components URL.
func writeCAPIRepository(g Gomega, moduleDir, version, dir, config, file string) string {
	opts := krusty.MakeDefaultOptions()
	opts.Reorder = krusty.ReorderOptionLegacy
	res, err := krusty.MakeKustomizer(opts).Run(filesys.MakeFsOnDisk(), filepath.Join(moduleDir, config, "config", "default"))
	g.Expect(err).NotTo(HaveOccurred())
	components, err := res.AsYaml()
	g.Expect(err).NotTo(HaveOccurred())
	metadata, err := os.ReadFile(filepath.Join(moduleDir, "metadata.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.MkdirAll(dir, 0o755)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(dir, file), components, 0o644)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(dir, "metadata.yaml"), metadata, 0o644)).To(Succeed())
	_ = version
	return "file://" + filepath.ToSlash(filepath.Join(dir, file))
}

// applyFile creates every object of a YAML file.
func applyFile(ctx context.Context, g Gomega, c crclient.Client, path string) {
	f, err := os.Open(path)
	g.Expect(err).NotTo(HaveOccurred())
	defer f.Close()
	dec := yaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		o := &unstructured.Unstructured{}
		if err := dec.Decode(&o.Object); err != nil {
			break
		}
		if len(o.Object) == 0 {
			continue
		}
		g.Expect(c.Create(ctx, o)).To(Succeed())
	}
}

// writeKubeconfig writes the admin's kubeconfig for clusterctl.
func writeKubeconfig(cfg *rest.Config, path string) error {
	raw := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: podbypod
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: admin
  user:
    token: %s
contexts:
- name: podbypod
  context: {cluster: podbypod, user: admin}
current-context: podbypod
`, cfg.Host, b64(cfg.CAData), cfg.BearerToken)
	return os.WriteFile(path, []byte(raw), 0o600)
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
