package etcd

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
)

// DefaultVersion is the etcd version Status reports unless Options say
// otherwise: a 3.6 release, the minor recent kubeadm versions run.
const DefaultVersion = "3.6.6"

// ErrNoMember is what Dial answers for a pod that hosts no running member:
// no such etcd pod, or its member was removed (a real one would have
// stopped).
var ErrNoMember = errors.New("no etcd member is running in the pod")

// ErrClosed is what Dial answers once the Server is closed.
var ErrClosed = errors.New("the etcd server is closed")

// Options configure a Server.
type Options struct {
	// Store is the workload cluster's store, the only state: the members
	// are its etcd pods. Required.
	Store *store.Store
	// CACertPEM and CAKeyPEM are the cluster's etcd CA, the tls.crt and
	// tls.key of Cluster API's <cluster>-etcd Secret. It signs the serving
	// certificates and is the only signer of accepted client certificates.
	// Required.
	CACertPEM, CAKeyPEM []byte
	// Version is the etcd version Status reports. Default DefaultVersion.
	Version string
	// Now is the clock for certificates. Default time.Now.
	Now func() time.Time
	// Log receives failed calls, and every call at V(4). Default: discard.
	Log logr.Logger
}

// Server answers etcd v3 gRPC as the members of one workload cluster.
type Server struct {
	opts      Options
	ca        tls.Certificate
	clusterID uint64
	grpc      *grpc.Server
	listener  *pipeListener
	served    chan struct{}

	// mu serialises the RPCs that write (remove, move leader) so that each
	// reads the state the previous one left.
	mu sync.Mutex

	certsMu sync.Mutex
	certs   map[string]*servingCert // by pod name and IP
}

// New starts a Server; Close stops it.
func New(opts Options) (*Server, error) {
	if opts.Store == nil {
		return nil, errors.New("etcd: Options.Store is required")
	}
	if opts.Version == "" {
		opts.Version = DefaultVersion
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Log.GetSink() == nil {
		opts.Log = logr.Discard()
	}
	ca, err := tls.X509KeyPair(opts.CACertPEM, opts.CAKeyPEM)
	if err != nil {
		return nil, fmt.Errorf("failed to read the etcd CA: %w", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Leaf)
	// The cluster ID is the CA's: stable across rebuilds, one per cluster.
	sum := sha256.Sum256(ca.Leaf.Raw)
	s := &Server{
		opts:      opts,
		ca:        ca,
		clusterID: binary.BigEndian.Uint64(sum[:8]) | 1,
		listener:  newPipeListener(),
		served:    make(chan struct{}),
		certs:     map[string]*servingCert{},
	}
	creds := credentials.NewTLS(&tls.Config{
		MinVersion:     tls.VersionTLS12,
		ClientAuth:     tls.RequireAndVerifyClientCert,
		ClientCAs:      pool,
		GetCertificate: s.servingCertificate,
	})
	s.grpc = grpc.NewServer(grpc.Creds(creds), grpc.ChainUnaryInterceptor(s.logCalls))
	etcdserverpb.RegisterClusterServer(s.grpc, &clusterServer{s: s})
	etcdserverpb.RegisterMaintenanceServer(s.grpc, &maintenanceServer{s: s})
	go func() {
		defer close(s.served)
		// Serve returns when Close stops the server.
		_ = s.grpc.Serve(s.listener)
	}()
	return s, nil
}

// Close stops the server and ends every connection Dial made.
func (s *Server) Close() {
	s.grpc.Stop()
	<-s.served
}

// Dial connects to the member of the etcd pod (kube-system/<podName>, as
// a port-forward to its port 2379 does): the connection speaks TLS and
// etcd v3 gRPC, answered as that member. A pod that hosts no running member
// is ErrNoMember.
func (s *Server) Dial(ctx context.Context, podName string) (net.Conn, error) {
	v, err := readView(s.opts.Store)
	if err != nil {
		return nil, err
	}
	if m, ok := v.byPod[podName]; !ok || m.removed {
		return nil, fmt.Errorf("failed to connect to etcd in Pod kube-system/%s: %w", podName, ErrNoMember)
	}
	client, server := net.Pipe()
	addr := memberAddr{pod: podName}
	if err := s.listener.deliver(ctx, &addressedConn{Conn: server, local: addr, remote: clientAddr{}}); err != nil {
		_ = client.Close()
		_ = server.Close()
		return nil, err
	}
	return &addressedConn{Conn: client, local: clientAddr{}, remote: addr}, nil
}

// memberAddr is the address of a member's end of a Dial connection; RPCs
// read it to know which member answers.
type memberAddr struct{ pod string }

func (memberAddr) Network() string  { return "pipe" }
func (a memberAddr) String() string { return "etcd/" + a.pod }

type clientAddr struct{}

func (clientAddr) Network() string { return "pipe" }
func (clientAddr) String() string  { return "etcd-client" }

// addressedConn is a pipe end that tells its addresses.
type addressedConn struct {
	net.Conn
	local, remote net.Addr
}

func (c *addressedConn) LocalAddr() net.Addr  { return c.local }
func (c *addressedConn) RemoteAddr() net.Addr { return c.remote }

// pipeListener hands the gRPC server the connections Dial makes.
type pipeListener struct {
	conns     chan net.Conn
	done      chan struct{}
	closeOnce sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) deliver(ctx context.Context, c net.Conn) error {
	select {
	case l.conns <- c:
		return nil
	case <-l.done:
		return ErrClosed
	case <-ctx.Done():
		return fmt.Errorf("failed to connect to etcd: %w", ctx.Err())
	}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return memberAddr{} }
