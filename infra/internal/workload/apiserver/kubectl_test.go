package apiserver

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
)

// kubectlPath is the real kubectl; the test fails (not skips) without it.
const kubectlPath = "/usr/bin/kubectl"

// writeKubeconfig writes a kubeconfig shaped like Cluster API's
// <cluster>-kubeconfig: the cluster CA and a client certificate it signed.
func writeKubeconfig(t *testing.T, ts *testServer, cluster string) string {
	t.Helper()
	cfg := ts.restConfig(t, cluster)
	kc := clientcmdapi.NewConfig()
	kc.Clusters[cluster] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData, TLSServerName: cluster}
	kc.AuthInfos[cluster+"-admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	kc.Contexts[cluster+"-admin@"+cluster] = &clientcmdapi.Context{Cluster: cluster, AuthInfo: cluster + "-admin"}
	kc.CurrentContext = cluster + "-admin@" + cluster
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// kubectlFor runs kubectl against the cluster with a kubeconfig of its own.
func kubectlFor(t *testing.T, ts *testServer, cluster string) (kubeconfig string, run func(args ...string) (string, error)) {
	kubeconfig = writeKubeconfig(t, ts, cluster)
	cacheDir, home := t.TempDir(), t.TempDir()
	return kubeconfig, func(args ...string) (string, error) {
		cmd := exec.Command(kubectlPath, append([]string{"--kubeconfig", kubeconfig, "--cache-dir", cacheDir, "--request-timeout", "20s"}, args...)...)
		cmd.Env = append(os.Environ(), "HOME="+home)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
}

func TestKubectlGetsLabelsAndDeletes(t *testing.T) {
	g := NewWithT(t)
	ts := startServer(t, store.Options{}, "c1")
	cs := clientset(t, ts, "c1")
	ctx := context.Background()
	for name, labels := range map[string]map[string]string{"cp-0": {"node-role.kubernetes.io/control-plane": ""}, "w-0": nil} {
		_, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Status: corev1.NodeStatus{
				Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
				NodeInfo:   corev1.NodeSystemInfo{KubeletVersion: "v1.36.3"},
			},
		}, metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
	}
	_, err := cs.CoreV1().Pods("kube-system").Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "etcd-cp-0"},
		Spec:       corev1.PodSpec{NodeName: "cp-0", Containers: []corev1.Container{{Name: "etcd", Image: "etcd"}}},
	}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())

	kubeconfig, kubectl := kubectlFor(t, ts, "c1")

	out, err := kubectl("get", "nodes")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(MatchRegexp(`NAME\s+STATUS\s+ROLES\s+AGE\s+VERSION`))
	g.Expect(out).To(MatchRegexp(`cp-0\s+Ready\s+control-plane\s+\S+\s+v1\.36\.3`))
	g.Expect(out).To(ContainSubstring("w-0"))

	out, err = kubectl("get", "nodes", "--chunk-size", "1", "-o", "name")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(strings.Fields(out)).To(Equal([]string{"node/cp-0", "node/w-0"}), "pages of one node each")

	out, err = kubectl("get", "pods", "-A")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(MatchRegexp(`kube-system\s+etcd-cp-0\s+0/1\s+Pending\s+0`))

	_, err = cs.AppsV1().Deployments("kube-system").Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "coredns"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"k8s-app": "kube-dns"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"k8s-app": "kube-dns"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "coredns", Image: "coredns"}}},
			},
		},
	}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	out, err = kubectl("get", "deployments", "-n", "kube-system")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(MatchRegexp(`NAME\s+READY\s+UP-TO-DATE\s+AVAILABLE\s+AGE`))
	g.Expect(out).To(MatchRegexp(`coredns\s+0/2\s+0\s+0`))

	_, err = cs.CoreV1().Events("default").Create(ctx, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "w-0.1"},
		InvolvedObject: corev1.ObjectReference{Kind: "Node", Name: "w-0"},
		Type:           corev1.EventTypeNormal, Reason: "NodeReady", Message: "Node w-0 status is now: NodeReady",
	}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	out, err = kubectl("get", "events")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(MatchRegexp(`LAST SEEN\s+TYPE\s+REASON\s+OBJECT\s+MESSAGE`))
	g.Expect(out).To(MatchRegexp(`Normal\s+NodeReady\s+node/w-0\s+Node w-0 status is now: NodeReady`))

	out, err = kubectl("label", "node", "w-0", "node-role.kubernetes.io/worker=")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("node/w-0 labeled"))
	n, err := cs.CoreV1().Nodes().Get(ctx, "w-0", metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n.Labels).To(HaveKeyWithValue("node-role.kubernetes.io/worker", ""))

	// A Node condition set through the status subresource, as a
	// MachineHealthCheck test does; conditions merge by type.
	out, err = kubectl("patch", "node", "cp-0", "--subresource", "status", "--type", "strategic",
		"-p", `{"status":{"conditions":[{"type":"Ready","status":"False","reason":"Test"}]}}`)
	g.Expect(err).NotTo(HaveOccurred(), out)
	n, err = cs.CoreV1().Nodes().Get(ctx, "cp-0", metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n.Status.Conditions).To(HaveLen(1))
	g.Expect(n.Status.Conditions[0].Status).To(Equal(corev1.ConditionFalse))
	out, err = kubectl("get", "node", "cp-0")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(MatchRegexp(`cp-0\s+NotReady`))

	out, err = kubectl("get", "nodes", "-l", "node-role.kubernetes.io/worker", "-o", "name")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(strings.TrimSpace(out)).To(Equal("node/w-0"))

	// delete waits for the object to go, with a watch.
	out, err = kubectl("delete", "node", "w-0", "--timeout", "20s")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring(`node "w-0" deleted`))
	_, err = cs.CoreV1().Nodes().Get(ctx, "w-0", metav1.GetOptions{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "got %v", err)

	out, err = kubectl("get", "node", "w-0")
	g.Expect(err).To(HaveOccurred())
	g.Expect(out).To(ContainSubstring(`nodes "w-0" not found`))

	// Another CA's certificate is refused.
	other := ts.restConfig(t, "c1")
	other.CertData, other.KeyData = newCA(t, "stranger-ca").clientCert(t)
	kc, err := clientcmd.LoadFromFile(kubeconfig)
	g.Expect(err).NotTo(HaveOccurred())
	for _, ai := range kc.AuthInfos {
		ai.ClientCertificateData, ai.ClientKeyData = other.CertData, other.KeyData
	}
	g.Expect(clientcmd.WriteToFile(*kc, kubeconfig)).To(Succeed())
	out, err = kubectl("get", "nodes")
	g.Expect(err).To(HaveOccurred(), out)
}

func TestKubectlDrainsANodeThroughEvictions(t *testing.T) {
	g := NewWithT(t)
	ts := startServer(t, store.Options{}, "c1")
	cs := clientset(t, ts, "c1")
	ctx := context.Background()
	_, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w-0"}}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	ds, err := cs.AppsV1().DaemonSets("kube-system").Create(ctx, &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-proxy"},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"k8s-app": "kube-proxy"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"k8s-app": "kube-proxy"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "kube-proxy", Image: "kube-proxy"}}},
			},
		},
	}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	pods := []*corev1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "default"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "kube-proxy-w-0", Namespace: "kube-system", OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "apps/v1", Kind: "DaemonSet", Name: ds.Name, UID: ds.UID, Controller: ptr.To(true),
		}}}},
	}
	for _, p := range pods {
		p.Spec = corev1.PodSpec{NodeName: "w-0", Containers: []corev1.Container{{Name: "c", Image: "i"}}}
		p.Status.Phase = corev1.PodRunning
		_, err := cs.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
	}

	_, kubectl := kubectlFor(t, ts, "c1")
	out, err := kubectl("drain", "w-0", "--ignore-daemonsets", "--force", "--timeout", "30s")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("evicting pod default/app"))
	g.Expect(out).To(ContainSubstring("node/w-0 drained"))

	n, err := cs.CoreV1().Nodes().Get(ctx, "w-0", metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n.Spec.Unschedulable).To(BeTrue(), "drain cordons")
	_, err = cs.CoreV1().Pods("default").Get(ctx, "app", metav1.GetOptions{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "got %v", err)
	_, err = cs.CoreV1().Pods("kube-system").Get(ctx, "kube-proxy-w-0", metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred(), "DaemonSet pods stay")
}
