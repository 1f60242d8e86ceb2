package clusterctl_test

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	clusterctl "sigs.k8s.io/cluster-api/cmd/clusterctl/client"
	clusterctlcluster "sigs.k8s.io/cluster-api/cmd/clusterctl/client/cluster"
	clusterctlconfig "sigs.k8s.io/cluster-api/cmd/clusterctl/client/config"
	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/capi-monolith/capi-monolith/dev"
	infrav1 "github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	ipamv1alpha1 "github.com/capi-monolith/capi-monolith/ipam/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/kustomize/bundle"
	mpv1alpha1 "github.com/capi-monolith/capi-monolith/machinepool/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/test/managertest"
)

var (
	kubeadmControlPlaneGVK = schema.GroupVersionKind{Group: "controlplane.cluster.x-k8s.io", Version: "v1beta2", Kind: "KubeadmControlPlane"}
	kubeadmConfigGVK       = schema.GroupVersionKind{Group: "bootstrap.cluster.x-k8s.io", Version: "v1beta2", Kind: "KubeadmConfig"}
)

const (
	moveTimeout = 2 * time.Minute
	// devStartTimeout bounds a `capi-monolith dev` start on a busy machine.
	devStartTimeout = 5 * time.Minute
)

// management is a dev management cluster (core and every module).
type management struct {
	client     client.Client
	kubeconfig string
}

// startInProcess starts one with dev.Start in this process.
func startInProcess(t *testing.T) *management {
	t.Helper()
	env, err := dev.Start(t.Context(), dev.Options{Modules: managertest.All()})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { NewWithT(t).Expect(env.Stop()).To(Succeed()) })
	return prepare(t, &management{client: env.Client, kubeconfig: env.KubeconfigPath})
}

// startProcess starts one as `capi-monolith dev` (a second manager in this
// process would clash with the first one's controller names), and waits
// for the kubeconfig line it prints once ready.
func startProcess(t *testing.T, scheme *runtime.Scheme) *management {
	t.Helper()
	g := NewWithT(t)
	dir := t.TempDir()
	binary := filepath.Join(dir, "capi-monolith")
	build := exec.Command("go", "build", "-trimpath", "-o", binary, "../..")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := build.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "go build: %s", out)
	m := &management{kubeconfig: filepath.Join(dir, "kubeconfig")}
	cmd := exec.Command(binary, "dev", "--quiet", "--kubeconfig-out="+m.kubeconfig, "--data-dir="+filepath.Join(dir, "state"))
	cmd.Dir = dir
	stdout, err := cmd.StdoutPipe()
	g.Expect(err).NotTo(HaveOccurred())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	g.Expect(cmd.Start()).To(Succeed())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-done:
		case <-time.After(time.Minute):
			_ = cmd.Process.Kill()
			<-done
		}
		// Read once the process is gone: it no longer writes.
		if t.Failed() {
			t.Logf("capi-monolith dev (target) printed:\n%s", tail(stderr.String(), 200))
		}
	})
	ready := make(chan struct{})
	go func() {
		scanner := bufio.NewScanner(stdout)
		for scanner.Scan() {
			if strings.HasPrefix(scanner.Text(), "kubeconfig: ") {
				close(ready)
			}
		}
	}()
	select {
	case <-ready:
	case <-done:
		t.Fatalf("capi-monolith dev exited:\n%s", stderr.String())
	case <-time.After(devStartTimeout):
		t.Fatalf("capi-monolith dev not ready within %s:\n%s", devStartTimeout, stderr.String())
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", m.kubeconfig)
	g.Expect(err).NotTo(HaveOccurred())
	m.client, err = client.New(cfg, client.Options{Scheme: scheme})
	g.Expect(err).NotTo(HaveOccurred())
	return prepare(t, m)
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// prepare makes a management cluster one clusterctl move accepts as source
// or target: clusterctl's inventory CRD, and the clusterctl label on every
// CRD (move discovers kinds by it; clusterctl init puts it there).
func prepare(t *testing.T, m *management) *management {
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	cfg, err := clusterctlconfig.New(ctx, "")
	g.Expect(err).NotTo(HaveOccurred())
	cc := clusterctlcluster.New(clusterctlcluster.Kubeconfig{Path: m.kubeconfig}, cfg)
	g.Expect(cc.ProviderInventory().EnsureCustomResourceDefinitions(ctx)).To(Succeed())
	crds := &apiextensionsv1.CustomResourceDefinitionList{}
	g.Expect(m.client.List(ctx, crds)).To(Succeed())
	for i := range crds.Items {
		crd := &crds.Items[i]
		patch := client.MergeFrom(crd.DeepCopy())
		if crd.Labels == nil {
			crd.Labels = map[string]string{}
		}
		crd.Labels[clusterctlv1.ClusterctlLabel] = ""
		g.Expect(m.client.Patch(ctx, crd, patch)).To(Succeed())
	}
	return m
}

// state is what must survive a move: each MonolithMachine's provider ID
// and each IPAddress's address, by name.
type state struct {
	providerIDs map[string]string
	addresses   map[string]string
}

// provisioned returns the namespace's state once the cluster is
// provisioned with n MonolithMachines, each provisioned with a provider ID,
// and every Machine has its Node.
func provisioned(ctx context.Context, g Gomega, env *management, namespace string, n int) state {
	mc := &infrav1.MonolithClusterList{}
	g.Expect(env.client.List(ctx, mc, client.InNamespace(namespace))).To(Succeed())
	g.Expect(mc.Items).To(HaveLen(1))
	g.Expect(mc.Items[0].Status.Initialization.Provisioned).To(Equal(ptr.To(true)), "MonolithCluster %s: %v", mc.Items[0].Name, conditions.Get(&mc.Items[0], infrav1.LoadBalancerAvailableCondition))
	mms := &infrav1.MonolithMachineList{}
	g.Expect(env.client.List(ctx, mms, client.InNamespace(namespace))).To(Succeed())
	g.Expect(mms.Items).To(HaveLen(n))
	st := state{providerIDs: map[string]string{}, addresses: map[string]string{}}
	for _, mm := range mms.Items {
		g.Expect(mm.Status.Initialization.Provisioned).To(Equal(ptr.To(true)), mm.Name)
		g.Expect(mm.Spec.ProviderID).NotTo(BeEmpty(), mm.Name)
		st.providerIDs[mm.Name] = mm.Spec.ProviderID
	}
	machines := &clusterv1.MachineList{}
	g.Expect(env.client.List(ctx, machines, client.InNamespace(namespace))).To(Succeed())
	g.Expect(machines.Items).To(HaveLen(n))
	for _, m := range machines.Items {
		g.Expect(m.Status.NodeRef.IsDefined()).To(BeTrue(), "Machine %s has its Node", m.Name)
	}
	ips := &ipamv1.IPAddressList{}
	g.Expect(env.client.List(ctx, ips, client.InNamespace(namespace))).To(Succeed())
	for _, ip := range ips.Items {
		st.addresses[ip.Name] = ip.Spec.Address
	}
	return st
}

// TestMoveProvisionedClustersToAnotherManagementCluster moves a cluster of
// each flavor (inMemory machines, IPAM addresses, a machine pool) with
// clusterctl's Move from one dev management cluster to another: the target
// reconciles the same machines with the same provider IDs and addresses,
// nothing is left in the source and nothing is made twice.
func TestMoveProvisionedClustersToAnotherManagementCluster(t *testing.T) {
	ctx := t.Context()
	g := NewWithT(t)
	src := startInProcess(t)
	dst := startProcess(t, src.client.Scheme())

	dir := t.TempDir()
	g.Expect(bundle.Write(dir, bundle.Options{Version: oldVersion})).To(Succeed())
	t.Setenv("MONOLITH_PROVISIONING_DELAY", "500ms")
	t.Setenv("MONOLITH_BOOTSTRAP_DELAY", "500ms")
	c, err := clusterctl.New(ctx, filepath.Join(dir, bundle.ClusterctlConfigFile))
	g.Expect(err).NotTo(HaveOccurred())

	const name = "dev"
	for _, tc := range []struct {
		flavor    string
		addresses int
	}{
		{flavor: ""},
		{flavor: "ipam", addresses: 3},
		{flavor: "machinepool"},
	} {
		t.Run("flavor "+strconv.Quote(tc.flavor), func(t *testing.T) {
			g := NewWithT(t)
			ns := "moved-" + tc.flavor
			if tc.flavor == "" {
				ns = "moved-default"
			}
			for _, env := range []*management{src, dst} {
				g.Expect(env.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
			}
			tmpl, err := c.GetClusterTemplate(ctx, clusterctl.GetClusterTemplateOptions{
				Kubeconfig: clusterctl.Kubeconfig{Path: src.kubeconfig},
				ProviderRepositorySource: &clusterctl.ProviderRepositorySourceOptions{
					InfrastructureProvider: bundle.ProviderName + ":" + oldVersion,
					Flavor:                 tc.flavor,
				},
				TargetNamespace:          ns,
				ClusterName:              name,
				KubernetesVersion:        "v1.36.0",
				ControlPlaneMachineCount: ptr.To[int64](1),
				WorkerMachineCount:       ptr.To[int64](2),
			})
			g.Expect(err).NotTo(HaveOccurred())
			for _, o := range tmpl.Objs() {
				g.Expect(src.client.Create(ctx, &o)).To(Succeed(), "%s %s", o.GetKind(), o.GetName())
			}

			// clusterctl moves only clusters whose control plane is
			// initialized and whose Machines have Nodes: the
			// KubeadmControlPlane initializes through the inMemory
			// cluster's workload API, which also has a Node per machine
			// (core makes a machine pool's Machines only once it reaches it).
			cluster := &clusterv1.Cluster{}
			var before state
			g.Eventually(func(g Gomega) {
				before = provisioned(ctx, g, src, ns, 3)
				g.Expect(src.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cluster)).To(Succeed())
				g.Expect(conditions.IsTrue(cluster, clusterv1.ClusterControlPlaneInitializedCondition)).To(BeTrue())
			}).WithTimeout(moveTimeout).WithPolling(time.Second).Should(Succeed())
			g.Expect(before.addresses).To(HaveLen(tc.addresses))

			g.Expect(c.Move(ctx, clusterctl.MoveOptions{
				FromKubeconfig: clusterctl.Kubeconfig{Path: src.kubeconfig},
				ToKubeconfig:   clusterctl.Kubeconfig{Path: dst.kubeconfig},
				Namespace:      ns,
			})).To(Succeed())

			// The target reconciles the moved objects: same machines, same
			// provider IDs and addresses, provisioned, none made anew.
			g.Eventually(func(g Gomega) {
				g.Expect(provisioned(ctx, g, dst, ns, 3)).To(Equal(before))
				g.Expect(dst.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cluster)).To(Succeed())
				g.Expect(ptr.Deref(cluster.Spec.Paused, false)).To(BeFalse(), "move unpauses the cluster in the target")
				g.Expect(conditions.IsTrue(cluster, clusterv1.ClusterInfrastructureReadyCondition)).To(BeTrue())
			}).WithTimeout(moveTimeout).WithPolling(time.Second).Should(Succeed())
			// What the moved objects reference moved too: each Machine's
			// bootstrap data Secret (the kubeadm bootstrap provider's,
			// owned by its KubeadmConfig) and its KubeadmConfig.
			machines := &clusterv1.MachineList{}
			g.Expect(dst.client.List(ctx, machines, client.InNamespace(ns))).To(Succeed())
			for _, m := range machines.Items {
				if _, ok := m.Labels[clusterv1.MachinePoolNameLabel]; ok {
					// A pool's Machines have no bootstrap of their own:
					// the MachinePool's is checked below.
					continue
				}
				g.Expect(m.Spec.Bootstrap.DataSecretName).NotTo(BeNil(), "Machine %s", m.Name)
				g.Expect(dst.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: *m.Spec.Bootstrap.DataSecretName}, &corev1.Secret{})).To(Succeed(), "Machine %s's bootstrap data moved", m.Name)
				config := &unstructured.Unstructured{}
				config.SetGroupVersionKind(kubeadmConfigGVK)
				g.Expect(dst.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: m.Spec.Bootstrap.ConfigRef.Name}, config)).To(Succeed(), "Machine %s's KubeadmConfig moved", m.Name)
			}
			pools := &clusterv1.MachinePoolList{}
			g.Expect(dst.client.List(ctx, pools, client.InNamespace(ns))).To(Succeed())
			for _, mp := range pools.Items {
				g.Expect(mp.Spec.Template.Spec.Bootstrap.DataSecretName).To(HaveValue(Not(BeEmpty())), "MachinePool %s", mp.Name)
				g.Expect(dst.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: *mp.Spec.Template.Spec.Bootstrap.DataSecretName}, &corev1.Secret{})).To(Succeed(), "MachinePool %s's bootstrap data moved", mp.Name)
				config := &unstructured.Unstructured{}
				config.SetGroupVersionKind(kubeadmConfigGVK)
				g.Expect(dst.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: mp.Spec.Template.Spec.Bootstrap.ConfigRef.Name}, config)).To(Succeed(), "MachinePool %s's KubeadmConfig moved", mp.Name)
			}
			if tc.flavor == "machinepool" {
				g.Expect(pools.Items).To(HaveLen(1))
			}
			if tc.flavor == "ipam" {
				pool := &ipamv1alpha1.MonolithIPPool{}
				g.Eventually(func(g Gomega) {
					g.Expect(dst.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-nodes"}, pool)).To(Succeed())
					g.Expect(pool.Status.IPAddresses).NotTo(BeNil())
					g.Expect(pool.Status.IPAddresses.Used).To(BeEquivalentTo(tc.addresses), "the pool's status is rebuilt in the target")
				}).WithTimeout(moveTimeout).WithPolling(time.Second).Should(Succeed())
			}

			// Nothing left in the source.
			g.Eventually(func(g Gomega) {
				for _, list := range []client.ObjectList{
					&clusterv1.ClusterList{}, &clusterv1.MachineList{}, &clusterv1.MachinePoolList{}, &infrav1.MonolithClusterList{},
					&infrav1.MonolithMachineList{}, &mpv1alpha1.MonolithMachinePoolList{}, &ipamv1alpha1.MonolithIPPoolList{},
					&ipamv1.IPAddressList{}, &ipamv1.IPAddressClaimList{}, &corev1.SecretList{},
				} {
					g.Expect(src.client.List(ctx, list, client.InNamespace(ns))).To(Succeed())
					g.Expect(list).To(HaveField("Items", BeEmpty()), "%T", list)
				}
				for _, gvk := range []schema.GroupVersionKind{kubeadmControlPlaneGVK, kubeadmConfigGVK} {
					list := &unstructured.UnstructuredList{}
					list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
					g.Expect(src.client.List(ctx, list, client.InNamespace(ns))).To(Succeed())
					g.Expect(list.Items).To(BeEmpty(), "%s left in the source", gvk.Kind)
				}
			}).WithTimeout(moveTimeout).WithPolling(time.Second).Should(Succeed())
		})
	}
}
