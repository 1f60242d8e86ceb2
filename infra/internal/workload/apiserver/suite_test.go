package apiserver

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
)

// testCA is a cluster CA as Cluster API's <cluster>-ca holds one.
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

// clientCert is a client certificate as the one in <cluster>-kubeconfig.
func (ca *testCA) clientCert(t testing.TB) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: "kubernetes-admin", Organization: []string{"system:masters"}},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}

// testCluster is one workload cluster behind the test server.
type testCluster struct {
	name  string
	ca    *testCA
	store *store.Store
}

// testServer serves clusters over TLS on one loopback listener,
// multiplexed by the TLS server name, through faults.
type testServer struct {
	addr     string
	clusters map[string]*testCluster
	served   *Clusters
	faults   *faults
}

func startServer(t testing.TB, storeOpts store.Options, names ...string) *testServer {
	t.Helper()
	return startServerWith(t, Options{}, storeOpts, names...)
}

// startServerWith is startServer with handler options (StoreFor is the test's).
func startServerWith(t testing.TB, opts Options, storeOpts store.Options, names ...string) *testServer {
	t.Helper()
	g := NewWithT(t)
	ts := &testServer{clusters: map[string]*testCluster{}, faults: &faults{}, served: &Clusters{}}
	for _, name := range names {
		c := &testCluster{name: name, ca: newCA(t, name+"-ca"), store: store.New(storeOpts)}
		ts.clusters[name] = c
		ct, err := NewClusterTLS(c.ca.certPEM, c.ca.keyPEM, []string{"127.0.0.1", name}, time.Now())
		g.Expect(err).NotTo(HaveOccurred())
		ts.served.Set(name, c.store, ct)
	}
	opts.StoreFor = ts.served.StoreFor
	h, err := New(opts)
	g.Expect(err).NotTo(HaveOccurred())
	cfg := TLSConfig(ts.served.TLSFor)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	ts.addr = l.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, l, ts.faults.wrap(h), cfg) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("the server did not stop")
		}
	})
	return ts
}

// restConfig is a client configuration with the cluster's client certificate.
func (ts *testServer) restConfig(t testing.TB, cluster string) *rest.Config {
	c := ts.clusters[cluster]
	certPEM, keyPEM := c.ca.clientCert(t)
	return &rest.Config{
		Host: "https://" + ts.addr,
		TLSClientConfig: rest.TLSClientConfig{
			ServerName: cluster,
			CAData:     c.ca.certPEM,
			CertData:   certPEM,
			KeyData:    keyPEM,
		},
		// No client-side rate limit: the tests and benchmarks measure the server.
		QPS: -1,
	}
}

// faults lets tests cut watch connections and hold new ones, as a flaky
// network or a restarting server would.
type faults struct {
	mu       sync.Mutex
	cancels  []context.CancelFunc
	gate     chan struct{}
	watches  []url.Values
	requests int
}

func isWatch(r *http.Request) bool {
	w := r.URL.Query().Get("watch")
	return w == "true" || w == "1"
}

func (f *faults) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !isWatch(r) {
			f.mu.Lock()
			f.requests++
			f.mu.Unlock()
			h.ServeHTTP(w, r)
			return
		}
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		f.mu.Lock()
		f.watches = append(f.watches, r.URL.Query())
		gate := f.gate
		f.cancels = append(f.cancels, cancel)
		f.mu.Unlock()
		if gate != nil {
			select {
			case <-gate:
			case <-ctx.Done():
				return
			}
		}
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

// cutWatches ends every open watch; with hold, new watches wait until
// release.
func (f *faults) cutWatches(hold bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if hold && f.gate == nil {
		f.gate = make(chan struct{})
	}
	for _, c := range f.cancels {
		c()
	}
	f.cancels = nil
}

func (f *faults) release() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.gate != nil {
		close(f.gate)
		f.gate = nil
	}
}

func (f *faults) watchRequests() []url.Values {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]url.Values(nil), f.watches...)
}

// served is how many requests other than watches reached the handler.
func (f *faults) served() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests
}
