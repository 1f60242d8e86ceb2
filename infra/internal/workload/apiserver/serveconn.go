package apiserver

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"sync"
)

// ServeConn serves handler over TLS with cfg on one connection until the
// connection ends or ctx does: what a PortForward returns for a pod's
// kube-apiserver port (kube-apiserver-<node>, 6443), as the server end of
// a net.Pipe. KubeadmControlPlane dials that port through pods/portforward
// to read the expiry of the kube-apiserver certificate from a TLS
// handshake, sending no server name, so cfg must pick the cluster by other
// means than SNI (e.g. TLSConfig with a function returning the cluster's
// ClusterTLS).
func ServeConn(ctx context.Context, conn net.Conn, handler http.Handler, cfg *tls.Config) error {
	l := &oneConnListener{done: make(chan struct{}), conns: make(chan net.Conn, 1)}
	l.conns <- &closeNotifyingConn{Conn: conn, closed: l.Close}
	err := Serve(ctx, l, handler, cfg)
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// oneConnListener accepts one connection, then nothing until it is
// closed, which the connection's Close does.
type oneConnListener struct {
	conns     chan net.Conn
	done      chan struct{}
	closeOnce sync.Once
}

func (l *oneConnListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *oneConnListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return nil
}

func (l *oneConnListener) Addr() net.Addr { return pipeAddr{} }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

// closeNotifyingConn closes its listener when the server closes it.
type closeNotifyingConn struct {
	net.Conn
	closed func() error
}

func (c *closeNotifyingConn) Close() error {
	err := c.Conn.Close()
	_ = c.closed()
	return err
}
