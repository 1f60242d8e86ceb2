//go:build chaos

package chaos

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	kubeconfigutil "sigs.k8s.io/cluster-api/util/kubeconfig"
)

// Issue 28's bad inputs, each dealt between SIGKILLs of the manager, with
// the checks of every run (convergence, no duplicate address, nothing left
// after deletion, goroutines back to their baseline) and their own:
//
//   - bootstrap data inflating to 64 MiB, for a Machine of cluster a: never
//     bootstrapped (InvalidBootstrapData) across restarts, and deleted
//     cleanly;
//   - a JSON patch of 1,000 copies of a 256 KiB value sent to a's workload
//     API: refused (422) while b's workload API answers every request;
//   - a second MonolithCluster recording a's endpoint: it waits for the
//     endpoint (WaitingForEndpoint) across restarts, a's API answers on it
//     throughout and after the thief is deleted;
//   - IPAddresses made in advance in the ipam cluster's pool, without
//     claims or records: the machines scaled up across a restart take none
//     of them.
func TestBadInputsMixedWithManagerSIGKILLs(t *testing.T) {
	m := startManager(t)
	a := &chaosCluster{name: "bad-a", template: "cluster-template.yaml", machines: 3}
	b := &chaosCluster{name: "bad-b", template: "cluster-template.yaml", machines: 2}
	ipam := &chaosCluster{name: "bad-ipam", template: "cluster-template-ipam.yaml", machines: 4, pool: netip.MustParsePrefix("10.128.50.0/24")}
	var premade []string
	p := plan{
		clusters: []*chaosCluster{a, b, ipam},
		steps: []func(context.Context, Gomega){
			func(ctx context.Context, g Gomega) { createInflatingMachine(ctx, g, a) },
			func(ctx context.Context, g Gomega) { expectInflatingMachineRefusedThenDelete(ctx, g, a) },
			func(ctx context.Context, g Gomega) { sendMultiplyingPatchWhileProbing(ctx, g, a, b) },
			func(ctx context.Context, g Gomega) { createEndpointThief(ctx, g, a) },
			func(ctx context.Context, g Gomega) { expectThiefWaitsThenDelete(ctx, g, a) },
			func(ctx context.Context, g Gomega) {
				premade = premakeAddresses(ctx, g, ipam, 30)
				scaleMachineDeployment(ctx, g, ipam.namespace, "bad-ipam-md-0", 3)
			},
			func(ctx context.Context, g Gomega) { expectPremadeAvoidedThenDelete(ctx, g, ipam, premade) },
			func(ctx context.Context, g Gomega) { scaleMachineDeployment(ctx, g, a.namespace, "bad-a-md-0", 2) },
		},
		deletionFaults: 2,
		fault:          m.kill(),
		m:              m,
	}
	fig := p.run(t)
	NewWithT(t).Expect(fig.faults).To(BeNumerically(">=", 11))
	t.Logf("chaos figures (bad inputs, SIGKILL): %s", fig)
}

// badInputTimeout bounds each wait of the bad-input steps: a restarted
// manager syncs its cache and reconciles again within it.
const badInputTimeout = 3 * time.Minute

// createInflatingMachine makes a Machine of c (no MachineDeployment owns
// it) whose bootstrap Secret holds a cloud-config with one file inflating
// to 64 MiB, past the decoding bound.
func createInflatingMachine(ctx context.Context, g Gomega, c *chaosCluster) {
	var gz bytes.Buffer
	w, err := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	g.Expect(err).NotTo(HaveOccurred())
	zeros := make([]byte, 1<<20)
	for range 64 {
		_, err = w.Write(zeros)
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(w.Close()).To(Succeed())
	bomb := "#cloud-config\nwrite_files:\n- path: /big\n  encoding: gz+b64\n  content: " + base64.StdEncoding.EncodeToString(gz.Bytes()) + "\n"
	g.Expect(env.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.namespace, Name: "bomb"},
		Data:       map[string][]byte{"value": []byte(bomb), "format": []byte("cloud-config")},
	})).To(Succeed())
	mm := &unstructured.Unstructured{}
	mm.SetGroupVersionKind(monolithMachineGVK)
	mm.SetNamespace(c.namespace)
	mm.SetName("bomb")
	g.Expect(unstructured.SetNestedMap(mm.Object, map[string]any{"inMemory": map[string]any{}}, "spec", "backend")).To(Succeed())
	g.Expect(env.Client.Create(ctx, mm)).To(Succeed())
	g.Expect(env.Client.Create(ctx, &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.namespace, Name: "bomb", Labels: map[string]string{clusterv1.ClusterNameLabel: c.name}},
		Spec: clusterv1.MachineSpec{
			ClusterName: c.name, Version: kubernetesVersion,
			Bootstrap: clusterv1.Bootstrap{DataSecretName: ptr.To("bomb")},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: monolithMachineGVK.Group, Kind: monolithMachineGVK.Kind, Name: "bomb"},
		},
	})).To(Succeed())
}

// expectInflatingMachineRefusedThenDelete waits until the machine (after
// the SIGKILL dealt since it was made) says its bootstrap data is invalid,
// checks it was never bootstrapped, and deletes it.
func expectInflatingMachineRefusedThenDelete(ctx context.Context, g Gomega, c *chaosCluster) {
	g.Eventually(func(g Gomega) {
		mm, err := get(ctx, monolithMachineGVK, c.namespace, "bomb")
		g.Expect(err).NotTo(HaveOccurred())
		cond := condition(mm, "BootstrapExecSucceeded")
		g.Expect(cond).NotTo(BeNil(), "MonolithMachine bomb has BootstrapExecSucceeded")
		g.Expect(cond["status"]).To(Equal("False"))
		g.Expect(cond["reason"]).To(Equal("InvalidBootstrapData"))
		g.Expect(cond["message"]).To(ContainSubstring("decompresses to more than"))
		g.Expect(condition(mm, "Ready")["status"]).NotTo(Equal("True"))
	}).WithTimeout(badInputTimeout).WithPolling(poll).Should(Succeed())
	g.Expect(env.Client.Delete(ctx, &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: c.namespace, Name: "bomb"}})).To(Succeed())
	g.Eventually(func(g Gomega) {
		_, err := get(ctx, monolithMachineGVK, c.namespace, "bomb")
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "MonolithMachine bomb gone: %v", err)
	}).WithTimeout(badInputTimeout).WithPolling(poll).Should(Succeed())
	g.Expect(env.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: c.namespace, Name: "bomb"}})).To(Succeed())
}

// condition returns obj's status condition of type t, nil without one.
func condition(obj *unstructured.Unstructured, t string) map[string]any {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == t {
			return m
		}
	}
	return nil
}

// workloadClient is a client of c's workload API through the kubeconfig a
// user gets, once it answers.
func workloadClient(ctx context.Context, g Gomega, c *chaosCluster) *kubernetes.Clientset {
	var cs *kubernetes.Clientset
	g.Eventually(func(g Gomega) {
		kubeconfig, err := kubeconfigutil.FromSecret(ctx, env.Client, client.ObjectKey{Namespace: c.namespace, Name: c.name})
		g.Expect(err).NotTo(HaveOccurred())
		cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
		g.Expect(err).NotTo(HaveOccurred())
		cfg.Timeout = workloadRequestTimeout
		cs, err = kubernetes.NewForConfig(cfg)
		g.Expect(err).NotTo(HaveOccurred())
		_, err = cs.Discovery().ServerVersion()
		g.Expect(err).NotTo(HaveOccurred())
	}).WithTimeout(badInputTimeout).WithPolling(poll).Should(Succeed(), "the workload API of %s/%s answers", c.namespace, c.name)
	return cs
}

// sendMultiplyingPatchWhileProbing sends a's workload API issue 28's JSON
// patch (1,000 copies of a 256 KiB value) while b's workload API is asked
// for its version in a loop: the patch is refused, and every one of b's
// answers comes.
func sendMultiplyingPatchWhileProbing(ctx context.Context, g Gomega, a, b *chaosCluster) {
	target := workloadClient(ctx, g, a)
	other := workloadClient(ctx, g, b)
	_, err := target.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "big"},
		Data:       map[string]string{"a": strings.Repeat("x", 256<<10)},
	}, metav1.CreateOptions{})
	g.Expect(err).To(Or(Not(HaveOccurred()), WithTransform(apierrors.IsAlreadyExists, BeTrue())))
	ops := make([]map[string]string, 0, 1000)
	for i := range 1000 {
		ops = append(ops, map[string]string{"op": "copy", "from": "/data/a", "path": fmt.Sprintf("/data/c%d", i)})
	}
	patch, err := json.Marshal(ops)
	g.Expect(err).NotTo(HaveOccurred())

	var mu sync.Mutex
	var answered int
	var failures []string
	done := make(chan struct{})
	probed := make(chan struct{})
	go func() {
		defer close(probed)
		for {
			select {
			case <-done:
				return
			default:
			}
			_, err := other.Discovery().ServerVersion()
			mu.Lock()
			if err != nil {
				failures = append(failures, err.Error())
			} else {
				answered++
			}
			mu.Unlock()
		}
	}()
	for range 3 {
		_, err = target.CoreV1().ConfigMaps("default").Patch(ctx, "big", types.JSONPatchType, patch, metav1.PatchOptions{})
		g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "the multiplying patch is refused with 422: %v", err)
	}
	close(done)
	<-probed
	g.Expect(failures).To(BeEmpty(), "the workload API of %s/%s answered every request meanwhile", b.namespace, b.name)
	g.Expect(answered).To(BeNumerically(">", 0))
	cm, err := target.CoreV1().ConfigMaps("default").Get(ctx, "big", metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cm.Data).To(HaveLen(1), "nothing of the refused patch is kept")
}

// createEndpointThief makes a Cluster "thief" in a's namespace whose
// MonolithCluster records a's endpoint (the admission webhook that would
// refuse it is not registered in this suite).
func createEndpointThief(ctx context.Context, g Gomega, a *chaosCluster) {
	var endpoint string
	g.Eventually(func(g Gomega) {
		var err error
		endpoint, err = endpointOf(ctx, a.namespace, a.name)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(endpoint).NotTo(BeEmpty())
	}).WithTimeout(badInputTimeout).WithPolling(poll).Should(Succeed(), "%s/%s has an endpoint", a.namespace, a.name)
	ap, err := netip.ParseAddrPort(endpoint)
	g.Expect(err).NotTo(HaveOccurred())
	mc := &unstructured.Unstructured{}
	mc.SetGroupVersionKind(monolithClusterGVK)
	mc.SetNamespace(a.namespace)
	mc.SetName("thief")
	mc.Object["spec"] = map[string]any{
		"backend":              map[string]any{"inMemory": map[string]any{}},
		"controlPlaneEndpoint": map[string]any{"host": ap.Addr().String(), "port": int64(ap.Port())},
	}
	g.Expect(env.Client.Create(ctx, mc)).To(Succeed())
	g.Expect(env.Client.Create(ctx, &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: a.namespace, Name: "thief"},
		Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
			APIGroup: monolithClusterGVK.Group, Kind: monolithClusterGVK.Kind, Name: "thief"}},
	})).To(Succeed())
}

// expectThiefWaitsThenDelete checks, after the SIGKILL dealt since the
// thief was made, that it waits for the endpoint while a's workload API
// answers on it; then deletes the thief and checks a's API still answers.
func expectThiefWaitsThenDelete(ctx context.Context, g Gomega, a *chaosCluster) {
	g.Eventually(func(g Gomega) {
		mc, err := get(ctx, monolithClusterGVK, a.namespace, "thief")
		g.Expect(err).NotTo(HaveOccurred())
		cond := condition(mc, "LoadBalancerAvailable")
		g.Expect(cond).NotTo(BeNil())
		g.Expect(cond["reason"]).To(Equal("WaitingForEndpoint"))
		provisioned, _, _ := unstructured.NestedBool(mc.Object, "status", "initialization", "provisioned")
		g.Expect(provisioned).To(BeFalse())
	}).WithTimeout(badInputTimeout).WithPolling(poll).Should(Succeed(), "the thief waits for the endpoint")
	workloadClient(ctx, g, a)
	g.Expect(env.Client.Delete(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: a.namespace, Name: "thief"}})).To(Succeed())
	g.Eventually(func(g Gomega) {
		_, err := get(ctx, monolithClusterGVK, a.namespace, "thief")
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "MonolithCluster thief gone: %v", err)
		err = env.Client.Get(ctx, client.ObjectKey{Namespace: a.namespace, Name: "thief"}, &clusterv1.Cluster{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "Cluster thief gone: %v", err)
	}).WithTimeout(badInputTimeout).WithPolling(poll).Should(Succeed())
	// Deleting the thief let go of nothing of a's.
	_, err := workloadClient(ctx, g, a).Discovery().ServerVersion()
	g.Expect(err).NotTo(HaveOccurred())
}

// premakeAddresses makes n IPAddresses of c's pool, naming it but no claim
// that exists and without allocation records (as another allocator or a
// restore would leave them), on the lowest addresses of the pool no
// IPAddress holds yet; it returns their addresses.
func premakeAddresses(ctx context.Context, g Gomega, c *chaosCluster, n int) []string {
	held := map[string]bool{}
	list := &ipamv1.IPAddressList{}
	g.Expect(env.Client.List(ctx, list, client.InNamespace(c.namespace))).To(Succeed())
	for _, a := range list.Items {
		held[a.Spec.Address] = true
	}
	var made []string
	for addr := c.pool.Addr(); c.pool.Contains(addr) && len(made) < n; addr = addr.Next() {
		if held[addr.String()] {
			continue
		}
		name := fmt.Sprintf("pre-%d", len(made))
		g.Expect(env.Client.Create(ctx, &ipamv1.IPAddress{
			ObjectMeta: metav1.ObjectMeta{Namespace: c.namespace, Name: name},
			Spec: ipamv1.IPAddressSpec{
				ClaimRef: ipamv1.IPAddressClaimReference{Name: name},
				PoolRef:  ipamv1.IPPoolReference{APIGroup: monolithIPPoolGVK.Group, Kind: monolithIPPoolGVK.Kind, Name: c.poolNames()[0]},
				Address:  addr.String(),
				Prefix:   ptr.To[int32](16),
			},
		})).To(Succeed())
		made = append(made, addr.String())
	}
	g.Expect(made).To(HaveLen(n))
	return made
}

// expectPremadeAvoidedThenDelete waits until every claim of c is bound and
// checks none took an address made in advance; then deletes those.
func expectPremadeAvoidedThenDelete(ctx context.Context, g Gomega, c *chaosCluster, premade []string) {
	g.Eventually(func(g Gomega) {
		claims := &ipamv1.IPAddressClaimList{}
		g.Expect(env.Client.List(ctx, claims, client.InNamespace(c.namespace))).To(Succeed())
		g.Expect(len(claims.Items)).To(BeNumerically(">=", c.machines), "a claim per machine")
		for _, cl := range claims.Items {
			g.Expect(cl.Status.AddressRef.Name).NotTo(BeEmpty(), "claim %s bound", cl.Name)
			a := &ipamv1.IPAddress{}
			g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: c.namespace, Name: cl.Status.AddressRef.Name}, a)).To(Succeed())
			g.Expect(premade).NotTo(ContainElement(a.Spec.Address), "claim %s took %s, which an IPAddress made in advance holds", cl.Name, a.Spec.Address)
		}
	}).WithTimeout(badInputTimeout).WithPolling(poll).Should(Succeed())
	for i := range premade {
		g.Expect(client.IgnoreNotFound(env.Client.Delete(ctx, &ipamv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Namespace: c.namespace, Name: fmt.Sprintf("pre-%d", i)}}))).To(Succeed())
	}
	g.Eventually(func(g Gomega) {
		for i := range premade {
			err := env.Client.Get(ctx, client.ObjectKey{Namespace: c.namespace, Name: fmt.Sprintf("pre-%d", i)}, &ipamv1.IPAddress{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "IPAddress pre-%d gone: %v", i, err)
		}
	}).WithTimeout(badInputTimeout).WithPolling(poll).Should(Succeed())
}
