package apiserver

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/cluster-api/controlplane/kubeadm/pkg/proxy"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
)

// TestKCPReadsTheAPIServerCertificateThroughPortForward serves a
// kube-apiserver pod's port 6443 with ServeConn over a pipe and reaches it
// with Cluster API's KubeadmControlPlane dialer (pkg/proxy), as KCP's
// GetAPIServerCertificateExpiry does: a TLS handshake without a server
// name or client certificate, then the kube-apiserver certificate read.
// A client-go client goes through the same port-forward too.
func TestKCPReadsTheAPIServerCertificateThroughPortForward(t *testing.T) {
	g := NewWithT(t)
	var (
		ct     *ClusterTLS
		inner  http.Handler
		served = make(chan error, 4)
		// ready orders the assignments below before their use.
		ready = make(chan struct{})
	)
	ts := startServerWith(t, Options{PortForward: func(r *http.Request, namespace, pod string, port int32) (net.Conn, error) {
		if namespace != "kube-system" || pod != "kube-apiserver-cp-0" || port != 6443 {
			return nil, errors.New("connection refused")
		}
		<-ready
		client, server := net.Pipe()
		cfg := TLSConfig(func(*tls.ClientHelloInfo) (*ClusterTLS, error) { return ct, nil })
		go func() { served <- ServeConn(r.Context(), server, inner, cfg) }()
		return client, nil
	}}, store.Options{}, "c1")
	c1 := ts.clusters["c1"]
	var err error
	ct, err = NewClusterTLS(c1.ca.certPEM, c1.ca.keyPEM, []string{"c1"}, time.Now())
	g.Expect(err).NotTo(HaveOccurred())
	inner, err = New(Options{StoreFor: func(*http.Request) (*store.Store, error) { return c1.store, nil }})
	g.Expect(err).NotTo(HaveOccurred())
	close(ready)
	createPod(t, ts, "kube-system", "kube-apiserver-cp-0")

	cfg := ts.restConfig(t, "c1")
	dialer, err := proxy.NewDialer(proxy.Proxy{Kind: "pods", Namespace: "kube-system", KubeConfig: rest.CopyConfig(cfg), Port: 6443})
	g.Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	raw, err := dialer.DialContextWithAddr(ctx, "kube-apiserver-cp-0")
	g.Expect(err).NotTo(HaveOccurred())
	conn := tls.Client(raw, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // as KCP reads the certificate
	g.Expect(conn.HandshakeContext(ctx)).To(Succeed())
	var names []string
	for _, c := range conn.ConnectionState().PeerCertificates {
		names = append(names, c.Subject.CommonName)
	}
	g.Expect(names).To(ContainElement("kube-apiserver"))
	g.Expect(conn.Close()).To(Succeed())
	g.Eventually(served).WithTimeout(10*time.Second).Should(Receive(BeNil()), "ServeConn ends with its connection")

	// A client-go client through the pod's port: the cluster's API.
	through := rest.CopyConfig(cfg)
	through.Host = "https://kube-apiserver-cp-0:6443"
	through.Dial = func(ctx context.Context, _, _ string) (net.Conn, error) {
		return dialer.DialContextWithAddr(ctx, "kube-apiserver-cp-0")
	}
	cs, err := kubernetes.NewForConfig(through)
	g.Expect(err).NotTo(HaveOccurred())
	v, err := cs.Discovery().ServerVersion()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v.GitVersion).To(Equal(DefaultKubernetesVersion))
}
