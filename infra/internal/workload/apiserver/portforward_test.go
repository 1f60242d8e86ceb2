package apiserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	oldhttpstream "k8s.io/apimachinery/pkg/util/httpstream" //nolint:staticcheck // client-go's dialers still return these types.
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
	"k8s.io/streaming/pkg/httpstream"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
)

// echoForwarder is a PortForward that connects every stream to an echo
// server (or refuses ports it is told to), recording what it was asked.
type echoForwarder struct {
	mu       sync.Mutex
	refuse   map[int32]bool
	asked    []string
	upgrades []string
}

func (e *echoForwarder) forward(r *http.Request, namespace, pod string, port int32) (net.Conn, error) {
	e.mu.Lock()
	e.asked = append(e.asked, fmt.Sprintf("%s/%s:%d", namespace, pod, port))
	e.upgrades = append(e.upgrades, strings.ToLower(r.Header.Get("Upgrade")))
	refused := e.refuse[port]
	e.mu.Unlock()
	if refused {
		return nil, errors.New("connection refused")
	}
	client, server := net.Pipe()
	go func() {
		defer server.Close()
		_, _ = io.Copy(server, server)
	}()
	return client, nil
}

func (e *echoForwarder) seen() (asked, upgrades []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.asked...), append([]string(nil), e.upgrades...)
}

// dialers are how client-go's port-forwards connect: SPDY tunnelled in a
// websocket first, plain SPDY when the upgrade fails (kubectl and
// KubeadmControlPlane), and plain SPDY alone.
func dialers(t *testing.T, ts *testServer, namespace, pod string) map[string]oldhttpstream.Dialer {
	t.Helper()
	g := NewWithT(t)
	cfg := ts.restConfig(t, "c1")
	url := clientset(t, ts, "c1").CoreV1().RESTClient().Post().
		Resource("pods").Namespace(namespace).Name(pod).SubResource("portforward").URL()
	transport, upgrader, err := spdy.RoundTripperFor(cfg)
	g.Expect(err).NotTo(HaveOccurred())
	spdyDialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, url)
	wsDialer, err := portforward.NewSPDYOverWebsocketDialer(url, cfg)
	g.Expect(err).NotTo(HaveOccurred())
	return map[string]oldhttpstream.Dialer{
		"websocket": portforward.NewFallbackDialer(wsDialer, spdyDialer, func(err error) bool {
			return httpstream.IsUpgradeFailure(err) || oldhttpstream.IsUpgradeFailure(err)
		}),
		"spdy": spdyDialer,
	}
}

func createPod(t *testing.T, ts *testServer, namespace, name string) {
	t.Helper()
	_, err := clientset(t, ts, "c1").CoreV1().Pods(namespace).Create(context.Background(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec:       corev1.PodSpec{NodeName: "cp-0", Containers: []corev1.Container{{Name: "etcd", Image: "etcd"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

func TestPortForwardCarriesBytesBothWays(t *testing.T) {
	for _, via := range []string{"websocket", "spdy"} {
		t.Run(via, func(t *testing.T) {
			g := NewWithT(t)
			fwd := &echoForwarder{}
			ts := startServerWith(t, Options{PortForward: fwd.forward}, store.Options{}, "c1")
			createPod(t, ts, "kube-system", "etcd-cp-0")

			stop, ready := make(chan struct{}), make(chan struct{})
			pf, err := portforward.NewOnAddresses(dialers(t, ts, "kube-system", "etcd-cp-0")[via],
				[]string{"127.0.0.1"}, []string{"0:2379"}, stop, ready, io.Discard, io.Discard)
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

			// Two connections one after the other on the one port-forward
			// connection: each its own pair of streams.
			for i := range 2 {
				conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", ports[0].Local))
				g.Expect(err).NotTo(HaveOccurred())
				msg := fmt.Sprintf("hello %d through %s", i, via)
				_, err = conn.Write([]byte(msg))
				g.Expect(err).NotTo(HaveOccurred())
				buf := make([]byte, len(msg))
				g.Expect(conn.SetReadDeadline(time.Now().Add(20 * time.Second))).To(Succeed())
				_, err = io.ReadFull(conn, buf)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(string(buf)).To(Equal(msg))
				g.Expect(conn.Close()).To(Succeed())
			}
			asked, upgrades := fwd.seen()
			g.Expect(asked).To(Equal([]string{"kube-system/etcd-cp-0:2379", "kube-system/etcd-cp-0:2379"}))
			want := map[string]string{"websocket": "websocket", "spdy": "spdy/3.1"}[via]
			g.Expect(upgrades).To(HaveEach(want), "the protocol the client spoke")
		})
	}
}

func TestPortForwardToAMissingPodIsNotFound(t *testing.T) {
	for _, via := range []string{"websocket", "spdy"} {
		t.Run(via, func(t *testing.T) {
			g := NewWithT(t)
			fwd := &echoForwarder{}
			ts := startServerWith(t, Options{PortForward: fwd.forward}, store.Options{}, "c1")
			createPod(t, ts, "default", "etcd-cp-0") // another namespace's

			_, _, err := dialers(t, ts, "kube-system", "etcd-cp-0")[via].Dial(portforward.PortForwardProtocolV1Name)
			g.Expect(err).To(HaveOccurred())
			g.Expect(err.Error()).To(ContainSubstring(`pods "etcd-cp-0" not found`))
			asked, _ := fwd.seen()
			g.Expect(asked).To(BeEmpty())
		})
	}
}

// Without a forwarder, pods/portforward is answered as by a kube-apiserver
// whose kubelet is unreachable.
func TestPortForwardWithoutAForwarderIsAnUnreachableKubelet(t *testing.T) {
	g := NewWithT(t)
	ts := startServer(t, store.Options{}, "c1")
	createPod(t, ts, "kube-system", "etcd-cp-0")
	cs := clientset(t, ts, "c1")
	_, err := cs.CoreV1().Nodes().Create(context.Background(), &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "cp-0"},
		Status:     corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.2"}}},
	}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	err = cs.CoreV1().RESTClient().Post().
		Resource("pods").Namespace("kube-system").Name("etcd-cp-0").SubResource("portforward").Do(context.Background()).Error()
	var status apierrors.APIStatus
	g.Expect(err).To(BeAssignableToTypeOf(&apierrors.StatusError{}))
	status = err.(*apierrors.StatusError)
	g.Expect(status.Status().Code).To(BeEquivalentTo(http.StatusInternalServerError))
	g.Expect(err.Error()).To(Equal("error dialing backend: dial tcp 10.0.0.2:10250: connect: connection refused"))
}

// TestPortForwardReportsAConnectionItCannotMake dials as Cluster API's
// KubeadmControlPlane does (one error and one data stream of requestID 0)
// and reads the error stream, where the kubelet reports a refused port.
func TestPortForwardReportsAConnectionItCannotMake(t *testing.T) {
	g := NewWithT(t)
	fwd := &echoForwarder{refuse: map[int32]bool{2379: true}}
	ts := startServerWith(t, Options{PortForward: fwd.forward}, store.Options{}, "c1")
	createPod(t, ts, "kube-system", "etcd-cp-0")

	conn, _, err := dialers(t, ts, "kube-system", "etcd-cp-0")["websocket"].Dial(portforward.PortForwardProtocolV1Name)
	g.Expect(err).NotTo(HaveOccurred())
	defer conn.Close()
	headers := http.Header{}
	headers.Set(corev1.PortHeader, "2379")
	headers.Set(corev1.PortForwardRequestIDHeader, "0")
	headers.Set(corev1.StreamType, corev1.StreamTypeError)
	errStream, err := conn.CreateStream(headers)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(errStream.Close()).To(Succeed())
	headers.Set(corev1.StreamType, corev1.StreamTypeData)
	_, err = conn.CreateStream(headers)
	g.Expect(err).NotTo(HaveOccurred())

	msg, err := io.ReadAll(errStream)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(msg)).To(Equal("error forwarding port 2379 to pod kube-system/etcd-cp-0: connection refused"))
}
