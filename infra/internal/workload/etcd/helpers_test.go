package etcd_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/etcd"
	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
)

var podsResource = store.Resource{Resource: "pods", Namespaced: true}

// testCA is a CA as Cluster API's <cluster>-etcd Secret holds one.
type testCA struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
	keyPEM  []byte
}

func newCA(t testing.TB, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{
		cert: cert, key: key,
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}
}

// clientCert is a client certificate the CA signed, as KubeadmControlPlane
// makes one from the etcd CA (and as kubeadm's apiserver-etcd-client).
func (ca *testCA) clientCert(t testing.TB, cn string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func (ca *testCA) pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// kcpTLS is the client configuration KubeadmControlPlane builds: a client
// certificate from the etcd CA, and the server's certificate checked
// against that CA without its host name (members are reached by pod name).
func kcpTLS(t testing.TB, ca *testCA, signer *testCA) *tls.Config {
	roots := ca.pool()
	return &tls.Config{
		MinVersion:         tls.VersionTLS12,
		Certificates:       []tls.Certificate{signer.clientCert(t, "kube-apiserver-etcd-client")},
		InsecureSkipVerify: true, //nolint:gosec // the chain is verified below, as KCP does.
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("no server certificate")
			}
			inter := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				inter.AddCert(c)
			}
			_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter})
			return err
		},
	}
}

// addEtcdPod creates the etcd static pod kubeadm runs on a control plane node.
func addEtcdPod(t testing.TB, s *store.Store, node, ip string) {
	t.Helper()
	pod := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1",
		"kind":       "Pod",
		"metadata": map[string]any{
			"name":      "etcd-" + node,
			"namespace": "kube-system",
			"labels":    map[string]any{"component": "etcd", "tier": "control-plane"},
		},
		"spec": map[string]any{
			"nodeName":   node,
			"containers": []any{map[string]any{"name": "etcd", "image": "registry.k8s.io/etcd:3.6.6-0"}},
		},
		"status": map[string]any{"phase": "Running", "podIP": ip},
	}}
	if _, err := s.Create(podsResource, pod); err != nil {
		t.Fatal(err)
	}
}

// startEtcd runs a Server on the store, closed when the test ends.
func startEtcd(t testing.TB, s *store.Store, ca *testCA) *etcd.Server {
	t.Helper()
	srv, err := etcd.New(etcd.Options{Store: s, CACertPEM: ca.certPEM, CAKeyPEM: ca.keyPEM})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv
}

// etcdClient is go.etcd.io/etcd/client/v3 connected the way KCP connects:
// the endpoint is the pod's name, the connection comes from dial.
func etcdClient(t testing.TB, pod string, cfg *tls.Config, dial func(ctx context.Context, addr string) (net.Conn, error)) *clientv3.Client {
	t.Helper()
	g := NewWithT(t)
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{pod},
		DialTimeout: 10 * time.Second,
		DialOptions: []grpc.DialOption{grpc.WithContextDialer(dial)},
		TLS:         cfg,
		Logger:      zap.NewNop(),
	})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// direct dials the Server itself, as the port-forward does.
func direct(srv *etcd.Server) func(ctx context.Context, addr string) (net.Conn, error) {
	return func(ctx context.Context, addr string) (net.Conn, error) { return srv.Dial(ctx, addr) }
}

func callCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// pemOf encodes a certificate and its key as a kubeconfig holds them.
func pemOf(t testing.TB, c tls.Certificate) (certPEM, keyPEM []byte) {
	t.Helper()
	keyDER, err := x509.MarshalECPrivateKey(c.PrivateKey.(*ecdsa.PrivateKey))
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Certificate[0]}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}
