package envtest_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/capi-monolith/capi-monolith/test/envtest"
)

var env *envtest.Environment

func TestMain(m *testing.M) {
	ctrl.SetLogger(envtest.TestLogger())
	start := time.Now()
	var err error
	env, err = envtest.Start(context.Background(), envtest.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("envtest started in %s\n", time.Since(start).Round(time.Millisecond))
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.Exit(code)
}

func TestClusterAPICRDsAreEstablished(t *testing.T) {
	g := NewWithT(t)
	for _, name := range []string{
		"clusters.cluster.x-k8s.io",
		"machines.cluster.x-k8s.io",
		"machinepools.cluster.x-k8s.io",
		"clusterclasses.cluster.x-k8s.io",
		"ipaddressclaims.ipam.cluster.x-k8s.io",
		"extensionconfigs.runtime.cluster.x-k8s.io",
		"clusterresourcesets.addons.cluster.x-k8s.io",
	} {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		g.Expect(env.Client.Get(t.Context(), client.ObjectKey{Name: name}, crd)).To(Succeed(), name)
		g.Expect(crd.Status.Conditions).To(ContainElement(And(
			HaveField("Type", apiextensionsv1.Established),
			HaveField("Status", apiextensionsv1.ConditionTrue),
		)), name)
	}
}

func TestV1Beta2ClusterCanBeCreated(t *testing.T) {
	g := NewWithT(t)
	ns, err := env.CreateNamespace(t.Context(), "cluster")
	g.Expect(err).NotTo(HaveOccurred())

	cluster := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: "c1", Namespace: ns.Name},
		// The CRD requires a non-empty spec.
		Spec: clusterv1.ClusterSpec{Paused: ptr.To(true)},
	}
	g.Expect(env.Client.Create(t.Context(), cluster)).To(Succeed())

	got := &clusterv1.Cluster{}
	g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(cluster), got)).To(Succeed())
	g.Expect(got.UID).To(Equal(cluster.UID))
}

func TestCreateNamespaceNamesNeverCollide(t *testing.T) {
	g := NewWithT(t)
	a, err := env.CreateNamespace(t.Context(), "same")
	g.Expect(err).NotTo(HaveOccurred())
	b, err := env.CreateNamespace(t.Context(), "same-")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(a.Name).To(HavePrefix("same-"))
	g.Expect(b.Name).To(HavePrefix("same-"))
	g.Expect(a.Name).NotTo(Equal(b.Name))
}

func TestServerReportsPinnedKubernetesVersion(t *testing.T) {
	g := NewWithT(t)
	dc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	g.Expect(err).NotTo(HaveOccurred())
	v, err := dc.ServerVersion()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v.GitVersion).To(Equal(envtest.KubernetesVersion))
}

func TestKubeconfigReachesTheServerAsAdmin(t *testing.T) {
	g := NewWithT(t)
	path := filepath.Join(t.TempDir(), "kubeconfig")
	g.Expect(env.WriteKubeconfig(path)).To(Succeed())

	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	g.Expect(err).NotTo(HaveOccurred())
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	// Listing CRDs needs cluster-wide rights: only an admin can.
	g.Expect(c.List(t.Context(), &apiextensionsv1.CustomResourceDefinitionList{})).To(Succeed())
}

func TestMissingBinariesNameTheMakeTarget(t *testing.T) {
	g := NewWithT(t)
	t.Setenv("KUBEBUILDER_ASSETS", t.TempDir())
	_, err := envtest.Start(t.Context(), envtest.Options{})
	g.Expect(err).To(MatchError(ContainSubstring("make envtest-assets")))
}

// A restarted apiserver serves the same data on the same address with the
// same credentials: the Environment's client works again without change.
func TestRestartAPIServerKeepsDataAddressAndCredentials(t *testing.T) {
	g := NewWithT(t)
	ns := env.Namespace(t, "restart")
	g.Expect(env.RestartAPIServer()).To(Succeed())
	g.Eventually(func() error {
		return env.Client.Get(t.Context(), client.ObjectKey{Name: ns}, &corev1.Namespace{})
	}).WithTimeout(time.Minute).WithPolling(100*time.Millisecond).Should(Succeed(), "the namespace made before the restart, read with the same client")
	g.Expect(env.RestartAPIServer()).To(Succeed())
	g.Eventually(func() error {
		_, err := env.CreateNamespace(t.Context(), "after-restart")
		return err
	}).WithTimeout(time.Minute).WithPolling(100*time.Millisecond).Should(Succeed(), "writes work after a second restart")
}
