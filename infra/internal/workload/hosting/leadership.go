package hosting

import (
	"context"
	"errors"
	"io"
	"maps"
	"net"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// Leadership lets several replicas share the clusters' endpoints. Every
// replica listens on every recorded endpoint (the advertised host resolves
// to all of them); the leader serves each cluster from its store, and the
// others forward each connection, bytes untouched (TLS ends at the leader),
// to the address the leader published once it served every cluster. When
// the leader goes, the replica elected next opens every cluster's store
// from its journal, serves, and publishes its own address; connections
// that arrive meanwhile wait for it (ForwardWait).
type Leadership struct {
	// Elected is closed once this replica leads (the manager's Elected).
	Elected <-chan struct{}
	// Self is the address the other replicas dial to reach this one's
	// listeners (its pod IP).
	Self string
	// Publish records address as the leader's.
	Publish func(ctx context.Context, address string) error
	// Leader returns the address the leader published last.
	Leader func(ctx context.Context) (string, error)
	// ForwardWait bounds how long a connection waits for a leader to
	// forward it to. Default DefaultForwardWait.
	ForwardWait time.Duration
}

// DefaultForwardWait covers a failover: the lease expiring, the next
// replica electing itself and loading every cluster.
const DefaultForwardWait = 30 * time.Second

// leaderTTL is how long a looked-up leader address is used before it is
// read again; a failed dial reads it again at once.
const leaderTTL = time.Second

// retryInterval paces a connection's attempts to reach a leader.
const retryInterval = 200 * time.Millisecond

// dialTimeout bounds one dial of the leader.
const dialTimeout = 3 * time.Second

var _ manager.LeaderElectionRunnable = (*Hosting)(nil)

// NeedLeaderElection implements manager.LeaderElectionRunnable: with
// Leadership every replica listens; without it only the leader runs.
func (h *Hosting) NeedLeaderElection() bool { return h.opts.Leadership == nil }

// lead makes this replica the one serving: every cluster's store is opened
// from its journal, Options.LoadWorkers at a time, then this replica's
// address is published.
func (h *Hosting) lead(ctx context.Context) {
	start := time.Now()
	h.mu.Lock()
	h.leading = true
	clusters := slices.Collect(maps.Values(h.clusters))
	h.mu.Unlock()
	forEach(h.opts.LoadWorkers, clusters, func(c *Cluster) {
		if err := h.loadStore(c, true); err != nil {
			// Tried again by the next sweep's serveOwn, and by Serve.
			h.opts.Log.Error(err, "Failed to load the workload cluster as the new leader", "cluster", c.key.String())
		}
	})
	h.serveOwn(ctx)
	for {
		err := h.opts.Leadership.Publish(ctx, h.opts.Leadership.Self)
		if err == nil {
			break
		}
		h.opts.Log.Error(err, "Failed to publish the workload API leader's address")
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
	h.opts.Log.Info("Leading the workload API", "address", h.opts.Leadership.Self, "clusters", len(clusters), "took", time.Since(start).String())
}

func (h *Hosting) isLeading() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.leading
}

// route serves conn here once c has its store, or forwards it to the
// leader, waiting for the store or a leader for at most ForwardWait
// (DefaultForwardWait without Leadership: a store being loaded). The
// cluster's connListener hands it a connection accepted before c had its
// store.
func (h *Hosting) route(ctx context.Context, c *Cluster, conn net.Conn) {
	wait := DefaultForwardWait
	if l := h.opts.Leadership; l != nil && l.ForwardWait > 0 {
		wait = l.ForwardWait
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	for {
		if c.Store() != nil {
			c.served.push(conn)
			return
		}
		if up := h.dialLeader(ctx, c); up != nil {
			pipe(conn, up)
			return
		}
		select {
		case <-c.ready:
		case <-ctx.Done():
			_ = conn.Close()
			return
		case <-time.After(retryInterval):
		}
	}
}

// dialLeader connects to the leader's listener of c, nil when there is no
// other leader to reach now.
func (h *Hosting) dialLeader(ctx context.Context, c *Cluster) net.Conn {
	if h.opts.Leadership == nil || h.isLeading() {
		// Loading: c is served here in a moment.
		return nil
	}
	addr := h.leaderAddress(ctx)
	if addr == "" || addr == h.opts.Leadership.Self {
		return nil
	}
	d := net.Dialer{Timeout: dialTimeout}
	up, err := d.DialContext(ctx, "tcp", net.JoinHostPort(addr, strconv.Itoa(int(c.endpoint.Port))))
	if err != nil {
		h.opts.Log.V(4).Info("Failed to reach the workload API leader", "leader", addr, "reason", err.Error())
		h.forgetLeader()
		return nil
	}
	return up
}

func (h *Hosting) leaderAddress(ctx context.Context) string {
	h.leaderMu.Lock()
	defer h.leaderMu.Unlock()
	if h.leaderAddr != "" && time.Since(h.leaderAt) < leaderTTL {
		return h.leaderAddr
	}
	addr, err := h.opts.Leadership.Leader(ctx)
	if err != nil {
		h.opts.Log.V(4).Info("Failed to read the workload API leader's address", "reason", err.Error())
		return ""
	}
	h.leaderAddr, h.leaderAt = addr, time.Now()
	return addr
}

func (h *Hosting) forgetLeader() {
	h.leaderMu.Lock()
	defer h.leaderMu.Unlock()
	h.leaderAddr = ""
}

// pipe copies both ways until either side ends, then closes both.
func pipe(a, b net.Conn) {
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go cp(a, b)
	go cp(b, a)
	<-done
	_ = a.Close()
	_ = b.Close()
}

// connListener is what the cluster's HTTP server accepts from: the
// connections of the cluster's TCP listener, served at once when the
// cluster has its store, and those route waited for the store (or a
// leader) for. The accept loop is the HTTP server's own: a served cluster
// costs no goroutine for it.
type connListener struct {
	tcp *net.TCPListener
	// route takes a connection that cannot be served at once (the cluster
	// has no store) and reports true; false: Accept returns it.
	route func(net.Conn) bool

	mu      sync.Mutex
	pending []net.Conn
	closed  bool
}

func newConnListener(tcp *net.TCPListener, route func(net.Conn) bool) *connListener {
	return &connListener{tcp: tcp, route: route}
}

// push hands Accept a connection route waited for.
func (l *connListener) push(conn net.Conn) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		_ = conn.Close()
		return
	}
	l.pending = append(l.pending, conn)
	l.mu.Unlock()
	// Wakes Accept, which waits in the TCP listener's: a deadline passed
	// ends that wait, and Accept looks at pending again.
	_ = l.tcp.SetDeadline(time.Now())
}

func (l *connListener) Accept() (net.Conn, error) {
	for {
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			return nil, net.ErrClosed
		}
		if len(l.pending) > 0 {
			conn := l.pending[0]
			l.pending[0] = nil
			l.pending = l.pending[1:]
			l.mu.Unlock()
			return conn, nil
		}
		l.mu.Unlock()
		conn, err := l.tcp.Accept()
		if errors.Is(err, os.ErrDeadlineExceeded) {
			// push woke it up (pending is read after the reset, so no
			// connection pushed meanwhile waits).
			_ = l.tcp.SetDeadline(time.Time{})
			continue
		}
		if err != nil {
			return nil, err
		}
		if !l.route(conn) {
			return conn, nil
		}
	}
}

func (l *connListener) Close() error {
	l.mu.Lock()
	l.closed = true
	pending := l.pending
	l.pending = nil
	l.mu.Unlock()
	for _, conn := range pending {
		_ = conn.Close()
	}
	return l.tcp.Close()
}

func (l *connListener) Addr() net.Addr { return l.tcp.Addr() }
