package etcd_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	oldhttpstream "k8s.io/apimachinery/pkg/util/httpstream" //nolint:staticcheck // client-go's dialers still return these types.
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
	"k8s.io/streaming/pkg/httpstream"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/apiserver"
	"github.com/capi-monolith/capi-monolith/infra/internal/workload/etcd"
	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
)

// kubectlPath is the real kubectl; the test fails (not skips) without it.
const kubectlPath = "/usr/bin/kubectl"

// workload is one workload cluster served as the wiring will serve it: the
// API server over TLS with its CA, and its etcd behind pods/portforward.
type workload struct {
	store  *store.Store
	etcdCA *testCA
	cfg    *rest.Config

	mu sync.Mutex
	// upgrades are the Upgrade headers of the port-forwards: the protocol
	// the client spoke.
	upgrades []string
}

func (w *workload) spoke() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.upgrades...)
}

func startWorkload(t *testing.T) *workload {
	t.Helper()
	g := NewWithT(t)
	s, etcdCA := threeMembers(t)
	etcdSrv := startEtcd(t, s, etcdCA)
	clusterCA := newCA(t, "cluster-ca")
	w := &workload{store: s, etcdCA: etcdCA}

	ct, err := apiserver.NewClusterTLS(clusterCA.certPEM, clusterCA.keyPEM, []string{"127.0.0.1"}, time.Now())
	g.Expect(err).NotTo(HaveOccurred())
	h, err := apiserver.New(apiserver.Options{
		StoreFor: func(*http.Request) (*store.Store, error) { return s, nil },
		PortForward: func(r *http.Request, namespace, pod string, port int32) (net.Conn, error) {
			w.mu.Lock()
			w.upgrades = append(w.upgrades, strings.ToLower(r.Header.Get("Upgrade")))
			w.mu.Unlock()
			if namespace == metav1.NamespaceSystem && strings.HasPrefix(pod, etcd.PodPrefix) && port == etcd.ClientPort {
				return etcdSrv.Dial(r.Context(), pod)
			}
			return nil, errors.New("connection refused")
		},
	})
	g.Expect(err).NotTo(HaveOccurred())
	l, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- apiserver.Serve(ctx, l, h, apiserver.TLSConfig(func(*tls.ClientHelloInfo) (*apiserver.ClusterTLS, error) { return ct, nil }))
	}()
	t.Cleanup(func() {
		cancel()
		g.Eventually(done).WithTimeout(10 * time.Second).Should(Receive(BeNil()))
	})
	cert := clusterCA.clientCert(t, "kubernetes-admin")
	certPEM, keyPEM := pemOf(t, cert)
	w.cfg = &rest.Config{
		Host:            "https://" + l.Addr().String(),
		TLSClientConfig: rest.TLSClientConfig{CAData: clusterCA.certPEM, CertData: certPEM, KeyData: keyPEM},
	}
	return w
}

// kcpDialer connects to a pod's port as KubeadmControlPlane's proxy
// package does: SPDY tunnelled in a websocket, falling back to SPDY (or
// SPDY alone), one error stream closed at once and one data stream, both
// of requestID 0, the data stream being the connection.
func (w *workload) kcpDialer(t *testing.T, via string, port int) func(ctx context.Context, pod string) (net.Conn, error) {
	cs, err := kubernetes.NewForConfig(w.cfg)
	if err != nil {
		t.Fatal(err)
	}
	return func(ctx context.Context, pod string) (net.Conn, error) {
		url := cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(metav1.NamespaceSystem).
			Name(pod).SubResource("portforward").URL()
		// A SPDY round tripper holds the connection it made: one per dial
		// (the etcd client may dial concurrently).
		transport, upgrader, err := spdy.RoundTripperFor(w.cfg)
		if err != nil {
			return nil, err
		}
		var dialer oldhttpstream.Dialer = spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, url)
		if via == "websocket" {
			ws, err := portforward.NewSPDYOverWebsocketDialer(url, w.cfg)
			if err != nil {
				return nil, err
			}
			dialer = portforward.NewFallbackDialer(ws, dialer, func(err error) bool {
				return httpstream.IsUpgradeFailure(err) || oldhttpstream.IsUpgradeFailure(err)
			})
		}
		conn, _, err := dialer.Dial(portforward.PortForwardProtocolV1Name)
		if err != nil {
			return nil, err
		}
		headers := http.Header{}
		headers.Set(corev1.PortHeader, fmt.Sprint(port))
		headers.Set(corev1.PortForwardRequestIDHeader, "0")
		headers.Set(corev1.StreamType, corev1.StreamTypeError)
		errStream, err := conn.CreateStream(headers)
		if err == nil {
			err = errStream.Close()
		}
		var data oldhttpstream.Stream
		if err == nil {
			headers.Set(corev1.StreamType, corev1.StreamTypeData)
			data, err = conn.CreateStream(headers)
		}
		if err != nil {
			_ = conn.Close()
			return nil, err
		}
		return &streamConn{conn: conn, Stream: data}, nil
	}
}

// streamConn is a port-forward data stream as a net.Conn.
type streamConn struct {
	oldhttpstream.Stream
	conn oldhttpstream.Connection
}

func (c *streamConn) Close() error {
	return errors.Join(c.Stream.Close(), c.conn.Close())
}
func (c *streamConn) LocalAddr() net.Addr                { return pfAddr{} }
func (c *streamConn) RemoteAddr() net.Addr               { return pfAddr{} }
func (c *streamConn) SetDeadline(t time.Time) error      { return nil }
func (c *streamConn) SetReadDeadline(t time.Time) error  { return nil }
func (c *streamConn) SetWriteDeadline(t time.Time) error { return nil }

type pfAddr struct{}

func (pfAddr) Network() string { return "portforward" }
func (pfAddr) String() string  { return "portforward" }

// TestKCPReachesEtcdThroughPortForward runs what KubeadmControlPlane asks
// of etcd (members, leader, alarms, moving the leader, removing a member)
// through the workload API server's pods/portforward, dialled as KCP dials.
func TestKCPReachesEtcdThroughPortForward(t *testing.T) {
	for _, via := range []string{"websocket", "spdy"} {
		t.Run(via, func(t *testing.T) {
			g := NewWithT(t)
			w := startWorkload(t)
			dial := w.kcpDialer(t, via, 2379)
			ctx := callCtx(t)
			client := func(pod string) *clientv3.Client { return etcdClient(t, pod, kcpTLS(t, w.etcdCA, w.etcdCA), dial) }

			// KCP's health check: members and alarms from any member, the
			// leader from the Status of the one it reached.
			c2 := client("etcd-cp-2")
			st, err := c2.Status(ctx, c2.Endpoints()[0])
			g.Expect(err).NotTo(HaveOccurred())
			list, err := c2.MemberList(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(memberNames(list.Members)).To(Equal([]string{"cp-0", "cp-1", "cp-2"}))
			ids := map[string]uint64{}
			for _, m := range list.Members {
				ids[m.Name] = m.ID
			}
			g.Expect(st.Header.MemberId).To(Equal(ids["cp-2"]))
			g.Expect(st.Leader).To(Equal(ids["cp-0"]))
			alarms, err := c2.AlarmList(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(alarms.Alarms).To(BeEmpty())

			// Scaling down cp-0: its leadership moves (from the leader), then
			// another member removes it.
			c0 := client("etcd-cp-0")
			_, err = c0.MoveLeader(ctx, ids["cp-1"])
			g.Expect(err).NotTo(HaveOccurred())
			_, err = c2.MemberRemove(ctx, ids["cp-0"])
			g.Expect(err).NotTo(HaveOccurred())
			list, err = c2.MemberList(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(memberNames(list.Members)).To(Equal([]string{"cp-1", "cp-2"}))
			st, err = c2.Status(ctx, c2.Endpoints()[0])
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(st.Leader).To(Equal(ids["cp-1"]))

			// A removed member's pod still exists but its etcd is gone: the
			// port-forward reports the refused connection, the TLS handshake fails.
			raw, err := dial(ctx, "etcd-cp-0")
			g.Expect(err).NotTo(HaveOccurred())
			defer raw.Close()
			g.Expect(tls.Client(raw, kcpTLS(t, w.etcdCA, w.etcdCA)).HandshakeContext(ctx)).NotTo(Succeed())

			g.Expect(w.spoke()).To(HaveEach(map[string]string{"websocket": "websocket", "spdy": "spdy/3.1"}[via]))
		})
	}
}

func TestKCPDialToAMissingPodFails(t *testing.T) {
	g := NewWithT(t)
	w := startWorkload(t)
	_, err := w.kcpDialer(t, "websocket", 2379)(callCtx(t), "etcd-cp-9")
	g.Expect(err).To(MatchError(ContainSubstring(`pods "etcd-cp-9" not found`)))
}

// TestClientGoPortForwardReachesEtcd forwards a local port with client-go's
// tools/portforward (kubectl's library) and talks etcd through it, the
// serving certificate checked with its host name (127.0.0.1).
func TestClientGoPortForwardReachesEtcd(t *testing.T) {
	g := NewWithT(t)
	w := startWorkload(t)
	cs, err := kubernetes.NewForConfig(w.cfg)
	g.Expect(err).NotTo(HaveOccurred())
	url := cs.CoreV1().RESTClient().Post().Resource("pods").Namespace("kube-system").Name("etcd-cp-1").SubResource("portforward").URL()
	transport, upgrader, err := spdy.RoundTripperFor(w.cfg)
	g.Expect(err).NotTo(HaveOccurred())
	ws, err := portforward.NewSPDYOverWebsocketDialer(url, w.cfg)
	g.Expect(err).NotTo(HaveOccurred())
	dialer := portforward.NewFallbackDialer(ws, spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, url),
		func(err error) bool { return httpstream.IsUpgradeFailure(err) || oldhttpstream.IsUpgradeFailure(err) })

	stop, ready := make(chan struct{}), make(chan struct{})
	pf, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{"0:2379"}, stop, ready, io.Discard, io.Discard)
	g.Expect(err).NotTo(HaveOccurred())
	done := make(chan error, 1)
	go func() { done <- pf.ForwardPorts() }()
	t.Cleanup(func() {
		close(stop)
		<-done
	})
	g.Eventually(ready).WithTimeout(20 * time.Second).Should(BeClosed())
	ports, err := pf.GetPorts()
	g.Expect(err).NotTo(HaveOccurred())

	c := localEtcdClient(t, w, ports[0].Local)
	ctx := callCtx(t)
	list, err := c.MemberList(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(memberNames(list.Members)).To(Equal([]string{"cp-0", "cp-1", "cp-2"}))
	st, err := c.Status(ctx, c.Endpoints()[0])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.Header.MemberId).To(Equal(memberIDOf(list, "cp-1")))
}

// TestKubectlPortForwardReachesEtcd runs the real kubectl port-forward,
// over websockets (kubectl's default) and over SPDY, and talks etcd
// through it.
func TestKubectlPortForwardReachesEtcd(t *testing.T) {
	for _, websockets := range []string{"true", "false"} {
		t.Run("websockets="+websockets, func(t *testing.T) {
			g := NewWithT(t)
			w := startWorkload(t)
			kubeconfig := w.writeKubeconfig(t)
			cmd := exec.Command(kubectlPath, "--kubeconfig", kubeconfig, "--cache-dir", t.TempDir(),
				"port-forward", "-n", "kube-system", "pod/etcd-cp-2", "--address", "127.0.0.1", ":2379")
			cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "KUBECTL_PORT_FORWARD_WEBSOCKETS="+websockets)
			stdout, err := cmd.StdoutPipe()
			g.Expect(err).NotTo(HaveOccurred())
			var stderr strings.Builder
			cmd.Stderr = &stderr
			g.Expect(cmd.Start()).To(Succeed())
			t.Cleanup(func() {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
			})
			// kubectl prints "Forwarding from 127.0.0.1:<port> -> 2379".
			portCh := make(chan string, 1)
			go func() {
				re := regexp.MustCompile(`Forwarding from 127\.0\.0\.1:(\d+) -> 2379`)
				sc := bufio.NewScanner(stdout)
				for sc.Scan() {
					if m := re.FindStringSubmatch(sc.Text()); m != nil {
						portCh <- m[1]
					}
				}
			}()
			var port string
			g.Eventually(portCh).WithTimeout(30*time.Second).Should(Receive(&port), func() string { return stderr.String() })

			var local uint16
			_, err = fmt.Sscan(port, &local)
			g.Expect(err).NotTo(HaveOccurred())
			c := localEtcdClient(t, w, local)
			ctx := callCtx(t)
			list, err := c.MemberList(ctx)
			g.Expect(err).NotTo(HaveOccurred(), stderr.String())
			g.Expect(memberNames(list.Members)).To(Equal([]string{"cp-0", "cp-1", "cp-2"}))
			st, err := c.Status(ctx, c.Endpoints()[0])
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(st.Header.MemberId).To(Equal(memberIDOf(list, "cp-2")))
			g.Expect(w.spoke()).To(HaveEach(map[string]string{"true": "websocket", "false": "spdy/3.1"}[websockets]))
		})
	}
}

// localEtcdClient talks etcd through a forwarded local port, as etcdctl
// would: the server certificate checked against the etcd CA for 127.0.0.1.
func localEtcdClient(t *testing.T, w *workload, port uint16) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{fmt.Sprintf("https://127.0.0.1:%d", port)},
		DialTimeout: 10 * time.Second,
		TLS: &tls.Config{
			RootCAs:      w.etcdCA.pool(),
			Certificates: []tls.Certificate{w.etcdCA.clientCert(t, "etcdctl")},
			MinVersion:   tls.VersionTLS12,
		},
		Logger: zap.NewNop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func memberIDOf(list *clientv3.MemberListResponse, name string) uint64 {
	for _, m := range list.Members {
		if m.Name == name {
			return m.ID
		}
	}
	return 0
}

// writeKubeconfig writes a kubeconfig shaped like Cluster API's
// <cluster>-kubeconfig: the cluster CA and a client certificate it signed.
func (w *workload) writeKubeconfig(t *testing.T) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["w"] = &clientcmdapi.Cluster{Server: w.cfg.Host, CertificateAuthorityData: w.cfg.CAData}
	kc.AuthInfos["w-admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: w.cfg.CertData, ClientKeyData: w.cfg.KeyData}
	kc.Contexts["w-admin@w"] = &clientcmdapi.Context{Cluster: "w", AuthInfo: "w-admin"}
	kc.CurrentContext = "w-admin@w"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}
