package dev_test

import (
	"context"
	"syscall"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sigs.k8s.io/cluster-api/util/secret"
)

// workloadInformer starts an informer on the ConfigMaps of namespace
// default of the workload cluster name, as a user's controller would, and
// returns the names its cache holds.
func workloadInformer(ctx context.Context, g Gomega, c client.Client, namespace, name string) func() []string {
	s := &corev1.Secret{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: secret.Name(name, secret.Kubeconfig)}, s)).To(Succeed())
	cfg, err := clientcmd.RESTConfigFromKubeConfig(s.Data[secret.KubeconfigDataName])
	g.Expect(err).NotTo(HaveOccurred())
	cs, err := kubernetes.NewForConfig(cfg)
	g.Expect(err).NotTo(HaveOccurred())
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace("default"))
	inf := factory.Core().V1().ConfigMaps()
	informer := inf.Informer()
	factory.Start(ctx.Done())
	g.Expect(cache.WaitForCacheSync(ctx.Done(), informer.HasSynced)).To(BeTrue())
	return func() []string {
		var names []string
		for _, o := range informer.GetStore().List() {
			names = append(names, o.(*corev1.ConfigMap).Name)
		}
		return names
	}
}

// workloadClient is a client of the workload cluster name, from the
// kubeconfig Secret Cluster API wrote.
func workloadClient(ctx context.Context, g Gomega, c client.Client, namespace, name string) client.Client {
	s := &corev1.Secret{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: secret.Name(name, secret.Kubeconfig)}, s)).To(Succeed())
	cfg, err := clientcmd.RESTConfigFromKubeConfig(s.Data[secret.KubeconfigDataName])
	g.Expect(err).NotTo(HaveOccurred())
	wc, err := client.New(cfg, client.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	return wc
}

// What a user writes into an inMemory workload cluster outlives `dev
// --data-dir`: after Ctrl-C and after kill -9, the restarted dev serves the
// same cluster on the same endpoint with the user's ConfigMap, same uid,
// and the cluster is Available again; a write after the first restart
// survives the kill too.
func TestWorkloadObjectsSurviveCtrlCAndKillOfDevWithADataDir(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	args := []string{"--data-dir=" + dir + "/state", "--quiet"}
	ctx := t.Context()
	const ns, name = "kept", "kept"

	first := startBinary(t, g, dir, args...)
	g.Expect(first.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	for _, obj := range defaultFlavor(g, ns, name) {
		g.Expect(first.client.Create(ctx, obj)).To(Succeed(), "%s %s", obj.GetKind(), obj.GetName())
	}
	cluster := expectAvailable(ctx, g, first.client, ns, name)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "users"}, Data: map[string]string{"k": "v"}}
	g.Expect(workloadClient(ctx, g, first.client, ns, name).Create(ctx, cm)).To(Succeed())
	// An informer started before the restart keeps working across it: its
	// watch resumes, or it gets 410 Gone and relists.
	informerCtx, stopInformer := context.WithCancel(ctx)
	defer stopInformer()
	informed := workloadInformer(informerCtx, g, first.client, ns, name)
	g.Eventually(informed).WithTimeout(provisionTimeout).Should(ContainElement("users"))
	first.interrupt(t, g)

	second := startBinary(t, g, dir, args...)
	again := expectAvailable(ctx, g, second.client, ns, name)
	g.Expect(again.Spec.ControlPlaneEndpoint).To(Equal(cluster.Spec.ControlPlaneEndpoint))
	wc := workloadClient(ctx, g, second.client, ns, name)
	got := &corev1.ConfigMap{}
	g.Eventually(func() error { return wc.Get(ctx, client.ObjectKeyFromObject(cm), got) }).
		WithTimeout(provisionTimeout).Should(Succeed(), "the workload API answers again")
	g.Expect(got.UID).To(Equal(cm.UID), "the same object, not a new one")
	g.Expect(got.Data).To(HaveKeyWithValue("k", "v"))
	after := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "after-restart"}}
	g.Expect(wc.Create(ctx, after)).To(Succeed())
	g.Eventually(informed).WithTimeout(provisionTimeout).Should(ContainElements("users", "after-restart"),
		"the informer of before the restart sees a write made after it")

	g.Expect(second.cmd.Process.Signal(syscall.SIGKILL)).To(Succeed())
	g.Eventually(second.exited).WithTimeout(exitTimeout).Should(Receive())

	third := startBinary(t, g, dir, args...)
	expectAvailable(ctx, g, third.client, ns, name)
	wc = workloadClient(ctx, g, third.client, ns, name)
	g.Eventually(func() error { return wc.Get(ctx, client.ObjectKeyFromObject(cm), got) }).
		WithTimeout(provisionTimeout).Should(Succeed())
	g.Expect(got.UID).To(Equal(cm.UID))
	kept := &corev1.ConfigMap{}
	g.Expect(wc.Get(ctx, client.ObjectKeyFromObject(after), kept)).To(Succeed(), "a write just before kill -9 survives it")
	g.Expect(kept.UID).To(Equal(after.UID))
	third.interrupt(t, g)
}
