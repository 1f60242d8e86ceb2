package apiserver

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	gwebsocket "github.com/gorilla/websocket"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/streaming/pkg/httpstream"
	"k8s.io/streaming/pkg/httpstream/spdy"
)

// PortForwardFunc connects to a port of a pod for one port-forward stream:
// what the kubelet does for kube-apiserver's pods/portforward. r is the
// pods/portforward request (StoreFor(r) is the cluster; its context ends
// with the port-forward session). An error is reported to the client on the
// stream's error stream, as the kubelet reports a refused connection.
type PortForwardFunc func(r *http.Request, namespace, pod string, port int32) (net.Conn, error)

// The port-forward protocol, as kube-apiserver and the kubelet speak it.
const (
	portForwardProtocolV1 = "portforward.k8s.io"
	// portForwardTunnelV1 is the websocket subprotocol that tunnels the
	// SPDY port-forward protocol (client-go's default since v1.31).
	portForwardTunnelV1 = "SPDY/3.1+" + portForwardProtocolV1
	// portForwardIdleTimeout ends a port-forward connection nothing used
	// for that long (the kubelet's default streaming idle timeout).
	portForwardIdleTimeout = 4 * time.Hour
	// portForwardPairTimeout is how long a stream waits for its pair (the
	// kubelet's stream creation timeout).
	portForwardPairTimeout = 30 * time.Second
)

// portForward serves pods/portforward: the pod must exist, then the
// connection is upgraded (SPDY, or SPDY tunnelled in a websocket) and every
// pair of error and data streams of one requestID is forwarded to the
// connection PortForward opens to the port the streams name.
func (h *Handler) portForward(w http.ResponseWriter, r *http.Request, req *request) {
	if r.Method != http.MethodGet && r.Method != http.MethodPost {
		writeError(w, methodNotAllowed(r.Method, r.URL.Path))
		return
	}
	if _, err := req.store.Get(req.res.storeResource(), req.namespace, req.name); err != nil {
		writeError(w, err)
		return
	}
	f := &forwarder{
		h: h, r: r, namespace: req.namespace, pod: req.name,
		pairs: map[string]*streamPair{}, ready: make(chan struct{}),
	}
	var conn httpstream.Connection
	// Streams that came in before a failure wait for ready, then find no
	// connection to leave.
	defer f.upgraded()
	if gwebsocket.IsWebSocketUpgrade(r) {
		conn = f.upgradeWebsocket(w, r)
	} else {
		if _, err := httpstream.Handshake(r, w, []string{portForwardProtocolV1}); err != nil {
			return // Handshake answered
		}
		conn = spdy.NewResponseUpgrader().UpgradeResponse(w, r, f.newStream)
	}
	if conn == nil {
		return // the upgrader answered
	}
	f.mu.Lock()
	f.conn = conn
	f.mu.Unlock()
	f.upgraded()
	conn.SetIdleTimeout(portForwardIdleTimeout)
	h.opts.Log.V(4).Info("Port-forwarding", "pod", req.namespace+"/"+req.name)
	// The connection lives as long as this handler: the request's context
	// ends when the server shuts down.
	select {
	case <-conn.CloseChan():
	case <-r.Context().Done():
		_ = conn.Close()
	}
}

// upgradeWebsocket accepts the websocket that tunnels SPDY and runs the
// SPDY server connection inside it, as kube-apiserver's tunnelling handler
// does; a client offering no tunnelling subprotocol is answered 400, which
// client-go's dialers take as the cue to fall back to SPDY.
func (f *forwarder) upgradeWebsocket(w http.ResponseWriter, r *http.Request) httpstream.Connection {
	offered := false
	for _, p := range gwebsocket.Subprotocols(r) {
		offered = offered || p == portForwardTunnelV1
	}
	if !offered {
		writeError(w, apierrors.NewBadRequest(fmt.Sprintf("unable to upgrade: the websocket subprotocol %s is required", portForwardTunnelV1)))
		return nil
	}
	upgrader := gwebsocket.Upgrader{
		Subprotocols: []string{portForwardTunnelV1},
		// Clients authenticate by certificate; there is no browser origin to check.
		CheckOrigin: func(*http.Request) bool { return true },
		Error: func(w http.ResponseWriter, _ *http.Request, code int, reason error) {
			writeError(w, apierrors.NewGenericServerResponse(code, "", corev1.Resource("pods"), "", reason.Error(), 0, false))
		},
	}
	ws, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return nil // Error answered
	}
	conn, err := spdy.NewServerConnection(portforward.NewTunnelingConnection("server", ws), f.newStream)
	if err != nil {
		f.h.opts.Log.Error(err, "Failed to start the SPDY connection in the port-forward websocket")
		_ = ws.Close()
		return nil
	}
	return conn
}

// forwarder serves one port-forward connection.
type forwarder struct {
	h         *Handler
	r         *http.Request
	namespace string
	pod       string
	ready     chan struct{} // closed once the upgrade is over
	readyOnce sync.Once

	mu    sync.Mutex
	conn  httpstream.Connection // nil when the upgrade failed
	pairs map[string]*streamPair
}

func (f *forwarder) upgraded() { f.readyOnce.Do(func() { close(f.ready) }) }

// streamPair is the error and data streams of one forwarded connection.
type streamPair struct {
	requestID string
	port      int32
	errs      httpstream.Stream
	data      httpstream.Stream
	timer     *time.Timer
}

// newStream pairs the client's streams by requestID; a complete pair is
// forwarded. It runs on the connection's frame loop, so it does not block.
func (f *forwarder) newStream(stream httpstream.Stream, _ <-chan struct{}) error {
	hdr := stream.Headers()
	requestID := hdr.Get(corev1.PortForwardRequestIDHeader)
	if requestID == "" {
		return fmt.Errorf("%q header is required", corev1.PortForwardRequestIDHeader)
	}
	port, err := strconv.ParseUint(hdr.Get(corev1.PortHeader), 10, 16)
	if err != nil || port == 0 {
		return fmt.Errorf("invalid %q header %q", corev1.PortHeader, hdr.Get(corev1.PortHeader))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	p, ok := f.pairs[requestID]
	if !ok {
		p = &streamPair{requestID: requestID, port: int32(port)}
		f.pairs[requestID] = p
		p.timer = time.AfterFunc(portForwardPairTimeout, func() { f.abandon(p) })
	}
	switch t := hdr.Get(corev1.StreamType); t {
	case corev1.StreamTypeError:
		if p.errs != nil {
			return fmt.Errorf("the error stream of request %s already exists", requestID)
		}
		p.errs = stream
	case corev1.StreamTypeData:
		if p.data != nil {
			return fmt.Errorf("the data stream of request %s already exists", requestID)
		}
		p.data = stream
	default:
		return fmt.Errorf("invalid stream type %q", t)
	}
	if p.errs != nil && p.data != nil {
		p.timer.Stop()
		delete(f.pairs, requestID)
		go f.forward(p)
	}
	return nil
}

// abandon ends a stream whose pair did not come in time.
func (f *forwarder) abandon(p *streamPair) {
	f.mu.Lock()
	if f.pairs[p.requestID] != p {
		f.mu.Unlock()
		return
	}
	delete(f.pairs, p.requestID)
	f.mu.Unlock()
	if p.errs != nil {
		_, _ = fmt.Fprintf(p.errs, "timed out waiting for the data stream of request %s", p.requestID)
		_ = p.errs.Close()
	}
	if p.data != nil {
		_ = p.data.Reset()
	}
}

// forward copies between the data stream and a connection to the port
// until either side ends; a connection that cannot be made is reported on
// the error stream.
func (f *forwarder) forward(p *streamPair) {
	defer func() {
		// Once the pair is done, the connection forgets its streams.
		<-f.ready
		f.mu.Lock()
		conn := f.conn
		f.mu.Unlock()
		if conn != nil {
			conn.RemoveStreams(p.errs, p.data)
		}
	}()
	target, err := f.h.opts.PortForward(f.r, f.namespace, f.pod, p.port)
	if err != nil {
		f.h.opts.Log.V(4).Info("Failed to forward a port", "pod", f.namespace+"/"+f.pod, "port", p.port, "err", err)
		_, _ = fmt.Fprintf(p.errs, "error forwarding port %d to pod %s/%s: %v", p.port, f.namespace, f.pod, err)
		_ = p.errs.Close()
		_ = p.data.Close()
		return
	}
	clientDone := make(chan struct{})
	go func() {
		defer close(clientDone)
		_, _ = io.Copy(target, p.data)
		// The client sends no more: pass that on, or end a connection
		// that cannot be half-closed so that its other side ends too.
		if cw, ok := target.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		} else {
			_ = target.Close()
		}
	}()
	_, err = io.Copy(p.data, target)
	if err != nil && !errors.Is(err, net.ErrClosed) && !errors.Is(err, io.ErrClosedPipe) {
		_, _ = fmt.Fprintf(p.errs, "error forwarding port %d to pod %s/%s: %v", p.port, f.namespace, f.pod, err)
	}
	_ = target.Close()
	_ = p.errs.Close()
	_ = p.data.Close()
	<-clientDone
}
