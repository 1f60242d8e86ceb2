package controlplane_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/capi-monolith/capi-monolith/dev/controlplane"
)

// rangeSecret asks etcd's JSON gateway for a Secret's key, as any local
// user could with curl.
func rangeSecret(c *http.Client, baseURL, namespace, name string) (*http.Response, error) {
	key := base64.StdEncoding.EncodeToString([]byte("/registry/secrets/" + namespace + "/" + name))
	body, _ := json.Marshal(map[string]string{"key": key})
	return c.Post(baseURL+"/v3/kv/range", "application/json", strings.NewReader(string(body)))
}

// etcd on 127.0.0.1 holds every Secret: a client without a certificate of
// etcd's own CA, plain HTTP or TLS, reads nothing; kube-apiserver (which
// stored the Secret) and a client with its certificate do.
func TestEtcdRefusesClientsWithoutACertificate(t *testing.T) {
	g := NewWithT(t)
	cp, err := controlplane.Start(t.Context(), controlplane.Options{WorkDir: t.TempDir()})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { g.Expect(cp.Stop()).To(Succeed()) })

	cs, err := kubernetes.NewForConfig(cp.Config)
	g.Expect(err).NotTo(HaveOccurred())
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "ca-key", Namespace: "default"}, StringData: map[string]string{"tls.key": "secret"}}
	_, err = cs.CoreV1().Secrets("default").Create(t.Context(), secret, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred(), "kube-apiserver writes to etcd with its client certificate")
	g.Expect(cp.Etcd.URL).To(HavePrefix("https://127.0.0.1:"))

	plain := &http.Client{Timeout: 5 * time.Second}
	resp, err := rangeSecret(plain, "http://"+strings.TrimPrefix(cp.Etcd.URL, "https://"), "default", "ca-key")
	if err == nil {
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		g.Expect(resp.StatusCode).NotTo(Equal(http.StatusOK), "plain HTTP is refused: %s", body)
		g.Expect(string(body)).NotTo(ContainSubstring("kvs"))
	}

	caPEM, err := os.ReadFile(cp.Etcd.CAFile)
	g.Expect(err).NotTo(HaveOccurred())
	roots := x509.NewCertPool()
	g.Expect(roots.AppendCertsFromPEM(caPEM)).To(BeTrue())
	noCert := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}}
	_, err = rangeSecret(noCert, cp.Etcd.URL, "default", "ca-key")
	g.Expect(err).To(MatchError(ContainSubstring("certificate required")), "TLS without a client certificate is refused")

	tlsConfig, err := cp.Etcd.TLSConfig()
	g.Expect(err).NotTo(HaveOccurred())
	withCert := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig}}
	resp, err = rangeSecret(withCert, cp.Etcd.URL, "default", "ca-key")
	g.Expect(err).NotTo(HaveOccurred())
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK), string(body))
	g.Expect(string(body)).To(ContainSubstring(`"count":"1"`), "the certificate kube-apiserver uses reads the Secret: the refusals above are etcd's")
}
