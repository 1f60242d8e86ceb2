package kubeadm

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// kubectlPath is the real kubectl; the test fails (not skips) without it.
const kubectlPath = "/usr/bin/kubectl"

func kubectl(t *testing.T, tc *testCluster) func(args ...string) (string, error) {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c1"] = &clientcmdapi.Cluster{Server: tc.url}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{}
	kc.Contexts["c1"] = &clientcmdapi.Context{Cluster: "c1", AuthInfo: "admin"}
	kc.CurrentContext = "c1"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	cacheDir, home := t.TempDir(), t.TempDir()
	return func(args ...string) (string, error) {
		cmd := exec.Command(kubectlPath, append([]string{"--kubeconfig", path, "--cache-dir", cacheDir, "--request-timeout", "20s"}, args...)...)
		cmd.Env = append(os.Environ(), "HOME="+home)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
}

// A person with kubectl sees a kubeadm cluster, and kubectl's own drain
// tells the kubeadm Pods apart as it does in a real cluster: static (mirror)
// Pods skipped, DaemonSet Pods ignored, nothing left to evict.
func TestKubectlSeesAKubeadmCluster(t *testing.T) {
	g := NewWithT(t)
	tc := newTestCluster(t)
	c := testClusterSpec(t)
	mustEnsure(t, tc, c, controlPlaneNode("cp-0", "10.0.0.10"))
	mustEnsure(t, tc, c, workerNode("w-0", "10.0.1.10"))
	run := kubectl(t, tc)

	out, err := run("get", "nodes")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(MatchRegexp(`(?m)^cp-0\s+Ready\s+control-plane\s+\S+\s+v1\.36\.3$`))
	g.Expect(out).To(MatchRegexp(`(?m)^w-0\s+Ready\s+<none>\s+\S+\s+v1\.36\.3$`))

	out, err = run("get", "pods", "-n", "kube-system")
	g.Expect(err).NotTo(HaveOccurred(), out)
	for _, name := range []string{"etcd-cp-0", "kube-apiserver-cp-0", "kube-controller-manager-cp-0", "kube-scheduler-cp-0", "kube-proxy-\\w{5}"} {
		g.Expect(out).To(MatchRegexp(`(?m)^`+name+`\s+1/1\s+Running\s+0\s`), name)
	}
	out, err = run("get", "pods", "-n", "kube-system", "-l", "component=etcd", "-o", "custom-columns=NAME:.metadata.name,IP:.status.podIP,NODE:.spec.nodeName")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(MatchRegexp(`(?m)^etcd-cp-0\s+10\.0\.0\.10\s+cp-0$`))

	out, err = run("get", "daemonset,deployment", "-n", "kube-system")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(MatchRegexp(`(?m)^daemonset.apps/kube-proxy\s+2\s+2\s+2\s+2\s+2\s`))
	g.Expect(out).To(MatchRegexp(`(?m)^deployment.apps/coredns\s+2/2\s+2\s+2\s`))

	out, err = run("drain", "cp-0", "--ignore-daemonsets", "--timeout", "30s")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("node/cp-0 drained"))
	out, err = run("get", "pods", "-n", "kube-system", "--field-selector", "spec.nodeName=cp-0", "-o", "name")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("pod/etcd-cp-0"), "drain leaves static Pods")
}
