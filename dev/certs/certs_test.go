package certs_test

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/capi-monolith/capi-monolith/dev/certs"
)

func TestServingCertificateIsTrustedForLoopbackByItsCA(t *testing.T) {
	g := NewWithT(t)
	b, err := certs.New(certs.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	pair, err := tls.X509KeyPair(b.CertPEM, b.KeyPEM)
	g.Expect(err).NotTo(HaveOccurred())
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	g.Expect(err).NotTo(HaveOccurred())
	for _, host := range []string{"127.0.0.1", "::1", "localhost"} {
		_, err := leaf.Verify(x509.VerifyOptions{Roots: b.CertPool(), DNSName: host})
		g.Expect(err).NotTo(HaveOccurred(), host)
	}
	_, err = leaf.Verify(x509.VerifyOptions{Roots: b.CertPool(), DNSName: "example.com"})
	g.Expect(err).To(HaveOccurred(), "only loopback names are certified")
}

func TestWriteStoresOwnerOnlyFilesUnderControllerRuntimesNames(t *testing.T) {
	g := NewWithT(t)
	b, err := certs.New(certs.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	dir := filepath.Join(t.TempDir(), "certs")
	g.Expect(b.Write(dir)).To(Succeed())
	for name, want := range map[string][]byte{certs.CAFile: b.CAPEM, certs.CertFile: b.CertPEM, certs.KeyFile: b.KeyPEM} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got).To(Equal(want), name)
		info, err := os.Stat(filepath.Join(dir, name))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(info.Mode().Perm()).To(Equal(os.FileMode(0o600)), name)
	}
}
