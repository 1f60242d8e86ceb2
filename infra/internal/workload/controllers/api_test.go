package controllers

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/apiserver"
	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
)

// kubectlPath is the real kubectl; the test fails (not skips) without it.
const kubectlPath = "/usr/bin/kubectl"

// serve serves the env's store with the real workload API handler (plain
// HTTP: TLS is the apiserver package's concern), and returns a clientset
// and a kubectl runner for it.
func (e *env) serve() (kubernetes.Interface, func(args ...string) (string, error)) {
	e.t.Helper()
	h, err := apiserver.New(apiserver.Options{StoreFor: func(*http.Request) (*store.Store, error) { return e.s, nil }})
	e.g.Expect(err).NotTo(HaveOccurred())
	srv := httptest.NewServer(h)
	e.t.Cleanup(srv.Close)
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL, QPS: -1})
	e.g.Expect(err).NotTo(HaveOccurred())

	kc := clientcmdapi.NewConfig()
	kc.Clusters["c1"] = &clientcmdapi.Cluster{Server: srv.URL}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{}
	kc.Contexts["c1"] = &clientcmdapi.Context{Cluster: "c1", AuthInfo: "admin"}
	kc.CurrentContext = "c1"
	path := filepath.Join(e.t.TempDir(), "kubeconfig")
	e.g.Expect(clientcmd.WriteToFile(*kc, path)).To(Succeed())
	cacheDir, home := e.t.TempDir(), e.t.TempDir()
	return cs, func(args ...string) (string, error) {
		cmd := exec.Command(kubectlPath, append([]string{"--kubeconfig", path, "--cache-dir", cacheDir, "--request-timeout", "30s"}, args...)...)
		cmd.Env = append(os.Environ(), "HOME="+home)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
}

// What a person does with kubectl and client-go after creating a cluster
// finishes as against a real one: rollout status, wait for Available, wait
// for a Job's completion.
func TestKubectlWaitsForWhatTheControllersDo(t *testing.T) {
	e := newEnv(t, Options{})
	e.node("cp", true, nil, nil)
	e.workers("w1", "w2")
	cs, kubectl := e.serve()
	ctx := context.Background()

	_, err := cs.AppsV1().Deployments(testNS).Create(ctx, deployment("web", 3, "nginx:1.27"), metav1.CreateOptions{})
	e.g.Expect(err).NotTo(HaveOccurred())
	out, err := kubectl("rollout", "status", "deployment/web", "--timeout=60s")
	e.g.Expect(err).NotTo(HaveOccurred(), out)
	e.g.Expect(out).To(ContainSubstring(`deployment "web" successfully rolled out`))
	out, err = kubectl("wait", "--for=condition=Available", "deployment/web", "--timeout=60s")
	e.g.Expect(err).NotTo(HaveOccurred(), out)
	e.g.Expect(out).To(ContainSubstring("deployment.apps/web condition met"))

	out, err = kubectl("set", "image", "deployment/web", "nginx=nginx:1.28", "main=nginx:1.28")
	e.g.Expect(err).To(HaveOccurred(), "there is no container nginx: %s", out)
	out, err = kubectl("set", "image", "deployment/web", "main=nginx:1.28")
	e.g.Expect(err).NotTo(HaveOccurred(), out)
	out, err = kubectl("rollout", "status", "deployment/web", "--timeout=60s")
	e.g.Expect(err).NotTo(HaveOccurred(), out)
	e.g.Expect(out).To(ContainSubstring(`deployment "web" successfully rolled out`))
	out, err = kubectl("get", "rs", "-l", "app=web", "-o", "custom-columns=REV:.metadata.annotations.deployment\\.kubernetes\\.io/revision,DESIRED:.spec.replicas", "--sort-by=.metadata.annotations.deployment\\.kubernetes\\.io/revision")
	e.g.Expect(err).NotTo(HaveOccurred(), out)
	e.g.Expect(out).To(MatchRegexp(`(?m)^1\s+0$`))
	e.g.Expect(out).To(MatchRegexp(`(?m)^2\s+3$`))

	out, err = kubectl("get", "pods", "-l", "app=web")
	e.g.Expect(err).NotTo(HaveOccurred(), out)
	e.g.Expect(out).To(MatchRegexp(`(?m)^web-\w+-\w{5}\s+1/1\s+Running\s+0\s`))

	tmpl := podTemplate("pi", "perl")
	tmpl.Spec.RestartPolicy = corev1.RestartPolicyNever
	_, err = cs.BatchV1().Jobs(testNS).Create(ctx, &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "pi"},
		Spec:       batchv1.JobSpec{Completions: ptr.To[int32](2), Template: tmpl},
	}, metav1.CreateOptions{})
	e.g.Expect(err).NotTo(HaveOccurred())
	out, err = kubectl("wait", "--for=condition=complete", "job/pi", "--timeout=60s")
	e.g.Expect(err).NotTo(HaveOccurred(), out)
	e.g.Expect(out).To(ContainSubstring("job.batch/pi condition met"))

	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](2), ServiceName: "db",
			// Set as kube-apiserver's defaulting would (the workload API does not default).
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To[int32](0)}},
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}, Template: podTemplate("db", "postgres")},
	}
	_, err = cs.AppsV1().StatefulSets(testNS).Create(ctx, sts, metav1.CreateOptions{})
	e.g.Expect(err).NotTo(HaveOccurred())
	out, err = kubectl("rollout", "status", "statefulset/db", "--timeout=60s")
	e.g.Expect(err).NotTo(HaveOccurred(), out)
	e.g.Expect(out).To(ContainSubstring("partitioned roll out complete: 2 new pods have been updated"))

	out, err = kubectl("rollout", "status", "daemonset/kube-proxy", "-n", "kube-system", "--timeout=60s")
	e.g.Expect(err).NotTo(HaveOccurred(), out)
	e.g.Expect(out).To(ContainSubstring(`daemon set "kube-proxy" successfully rolled out`))

	_, err = cs.CoreV1().Services(testNS).Create(ctx, service("web", corev1.ServiceSpec{Selector: map[string]string{"app": "web"},
		Ports: []corev1.ServicePort{{Port: 80}}}), metav1.CreateOptions{})
	e.g.Expect(err).NotTo(HaveOccurred())
	e.g.Eventually(func(g Gomega) {
		ep, err := cs.CoreV1().Endpoints(testNS).Get(ctx, "web", metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ep.Subsets).To(HaveLen(1))
		g.Expect(ep.Subsets[0].Addresses).To(HaveLen(3))
		svc, err := cs.CoreV1().Services(testNS).Get(ctx, "web", metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(svc.Spec.ClusterIP).NotTo(BeEmpty())
	}, wait, interval).Should(Succeed())
}
