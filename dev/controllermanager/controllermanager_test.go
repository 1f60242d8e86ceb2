package controllermanager_test

import (
	"crypto/tls"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capi-monolith/capi-monolith/dev/certs"
	"github.com/capi-monolith/capi-monolith/dev/controllermanager"
	"github.com/capi-monolith/capi-monolith/test/envtest"
)

// collectTimeout bounds the garbage collector's and the namespace
// controller's work once their informers run.
const collectTimeout = time.Minute

var env *envtest.Environment

func TestMain(m *testing.M) {
	envtest.Main(m, &env, envtest.Options{})
}

func binary(g Gomega) string {
	assets, err := envtest.BinaryAssetsDirectory()
	g.Expect(err).NotTo(HaveOccurred())
	path, err := controllermanager.Find(assets)
	g.Expect(err).NotTo(HaveOccurred(), "make envtest-assets builds kube-controller-manager beside kube-apiserver")
	return path
}

// The garbage collector deletes what a deleted object owned, and the
// namespace controller empties and removes a deleted namespace.
func TestOwnedObjectsAndDeletedNamespacesAreCollected(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	p, err := controllermanager.Start(ctx, controllermanager.Options{BinaryPath: binary(g), Config: env.Config, WorkDir: t.TempDir()})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = p.Stop() })

	ns := env.Namespace(t, "gc")
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner", Namespace: ns}}
	g.Expect(env.Client.Create(ctx, owner)).To(Succeed())
	owned := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{
		Name: "owned", Namespace: ns,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}},
	}}
	g.Expect(env.Client.Create(ctx, owned)).To(Succeed())
	kept := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "kept", Namespace: ns}}
	g.Expect(env.Client.Create(ctx, kept)).To(Succeed())

	g.Expect(env.Client.Delete(ctx, owner)).To(Succeed())
	g.Eventually(func() error {
		return env.Client.Get(ctx, client.ObjectKeyFromObject(owned), &corev1.Secret{})
	}).WithTimeout(collectTimeout).Should(Satisfy(apierrors.IsNotFound), "the owned Secret is collected")
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(kept), &corev1.Secret{})).To(Succeed(), "an object without owner stays")

	g.Expect(env.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	g.Eventually(func() error {
		return env.Client.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})
	}).WithTimeout(collectTimeout).Should(Satisfy(apierrors.IsNotFound), "the namespace is emptied and removed")

	g.Expect(p.Stop()).To(Succeed())
	g.Expect(p.Exited()).To(BeClosed())
}

// /healthz is served on 127.0.0.1 with the certificate given, and the
// process works in the folder given.
func TestHealthzServesOnLoopbackWithTheGivenCertificate(t *testing.T) {
	g := NewWithT(t)
	bundle, err := certs.New(certs.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	dir := t.TempDir()
	p, err := controllermanager.Start(t.Context(), controllermanager.Options{BinaryPath: binary(g), Config: env.Config, WorkDir: dir, Certs: bundle})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = p.Stop() })

	g.Expect(p.HealthAddress()).To(HavePrefix("127.0.0.1:"))
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: bundle.CertPool(), MinVersion: tls.VersionTLS12}}}
	resp, err := c.Get("https://" + p.HealthAddress() + "/healthz")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.Body.Close()).To(Succeed())
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
	g.Expect(filepath.Join(dir, "kubeconfig")).To(BeARegularFile())
	g.Expect(p.Stop()).To(Succeed())
}

// A process that dies after it was ready is started again, within
// Options.Restarts, and each death is reported; then it is left dead.
func TestADeadControllerManagerIsRestartedThenReported(t *testing.T) {
	g := NewWithT(t)
	var mu sync.Mutex
	var reports []bool
	p, err := controllermanager.Start(t.Context(), controllermanager.Options{
		BinaryPath: binary(g), Config: env.Config, WorkDir: t.TempDir(), Restarts: 1,
		OnExit: func(_ error, restarting bool) {
			mu.Lock()
			defer mu.Unlock()
			reports = append(reports, restarting)
		},
	})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = p.Stop() })
	reported := func() []bool {
		mu.Lock()
		defer mu.Unlock()
		return append([]bool(nil), reports...)
	}

	first := p.PID()
	g.Expect(syscall.Kill(-first, syscall.SIGKILL)).To(Succeed())
	g.Eventually(reported).WithTimeout(30 * time.Second).Should(Equal([]bool{true}))
	g.Eventually(p.PID).WithTimeout(30 * time.Second).ShouldNot(Equal(first))
	g.Expect(p.Exited()).NotTo(BeClosed())

	g.Expect(syscall.Kill(-p.PID(), syscall.SIGKILL)).To(Succeed())
	g.Eventually(p.Exited()).WithTimeout(30 * time.Second).Should(BeClosed())
	g.Expect(reported()).To(Equal([]bool{true, false}), "the last death is reported as final")
	g.Expect(p.Stop()).To(Succeed())
}

// A folder without kube-controller-manager (setup-envtest's assets) is told
// apart from other failures.
func TestFindSaysWhenTheBinaryIsMissing(t *testing.T) {
	g := NewWithT(t)
	_, err := controllermanager.Find(t.TempDir())
	g.Expect(err).To(MatchError(os.ErrNotExist))
	g.Expect(err).To(MatchError(ContainSubstring("kube-controller-manager")))
}
