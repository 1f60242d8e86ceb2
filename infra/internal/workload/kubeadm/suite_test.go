package kubeadm

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/apiserver"
	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
)

// testCluster is a store served by the real workload API handler, and the
// clients Cluster API's controllers use to read it.
type testCluster struct {
	store  *store.Store
	config *rest.Config
	client client.Client
	cs     kubernetes.Interface
	url    string
}

func newTestCluster(t *testing.T) *testCluster {
	t.Helper()
	s := store.New(store.Options{})
	h, err := apiserver.New(apiserver.Options{StoreFor: func(*http.Request) (*store.Store, error) { return s, nil }})
	if err != nil {
		t.Fatal(err)
	}
	// Plain HTTP: TLS is the apiserver package's concern, tested there.
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	t.Cleanup(s.Close)
	cfg := &rest.Config{Host: srv.URL, QPS: -1}
	c, err := client.New(cfg, client.Options{Scheme: clientgoscheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &testCluster{store: s, config: cfg, client: c, cs: cs, url: srv.URL}
}

func testCA(t *testing.T) []byte {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kubernetes"},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func testClusterSpec(t *testing.T) Cluster {
	return Cluster{
		Name:                 "c1",
		ControlPlaneEndpoint: "c1.workload.local:6443",
		KubernetesVersion:    "v1.36.3",
		PodSubnet:            "192.168.0.0/16",
		ServiceSubnet:        "10.128.0.0/12",
		CACertPEM:            testCA(t),
	}
}

func controlPlaneNode(name, ip string) Node {
	return Node{
		Name: name, ProviderID: "inmemory://" + name, KubeletVersion: "v1.36.3", ControlPlane: true,
		Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}},
		Labels:    map[string]string{corev1.LabelTopologyZone: "fd-1"},
	}
}

func workerNode(name, ip string) Node {
	return Node{
		Name: name, ProviderID: "inmemory://" + name, KubeletVersion: "v1.36.3",
		Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}},
	}
}

func mustEnsure(t *testing.T, tc *testCluster, c Cluster, n Node) {
	t.Helper()
	if err := Ensure(context.Background(), tc.store, c, n); err != nil {
		t.Fatalf("Ensure %s: %v", n.Name, err)
	}
}
