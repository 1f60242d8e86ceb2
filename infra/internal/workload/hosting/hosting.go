package hosting

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/secret"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/apiserver"
	"github.com/capi-monolith/capi-monolith/infra/internal/workload/controllers"
	"github.com/capi-monolith/capi-monolith/infra/internal/workload/etcd"
	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
)

// ErrNotHosted is returned for an endpoint this process cannot serve: a
// host other than the advertised one (Options.AdvertiseHost, else
// Options.Address), or a port outside Options.Ports (an endpoint a person
// set in the spec).
var ErrNotHosted = errors.New("the endpoint is not on the workload API address and port range")

// ErrEndpointInUse is returned for a recorded endpoint another process
// listens on: after `clusterctl move`, the source management cluster's
// manager until its sweep lets the port go. It passes; callers try again.
// It is also returned for an endpoint another, older MonolithCluster
// recorded first (Options.FirstRecorder), which passes only when that one
// goes.
var ErrEndpointInUse = errors.New("another process listens on the endpoint")

// ErrStopped is returned by Serve once the manager has stopped.
var ErrStopped = errors.New("the workload API hosting has stopped")

// caRetry bounds how often a cluster whose CA Secret is missing is looked
// up again: every client connection asks for it, and a Secret read goes to
// the management API server.
const caRetry = time.Second

// secretTimeout bounds one read of a CA Secret during a TLS handshake.
const secretTimeout = 5 * time.Second

// sweepGrace is how long a new cluster is served before its endpoint must
// be recorded by its MonolithCluster.
const sweepGrace = 30 * time.Second

// DefaultLoadWorkers loads a few stores at once: a journal's read is
// mostly waiting for the management API server (Secrets) or the disk, and
// one cluster's large journal does not hold up the others.
const DefaultLoadWorkers = 8

// DefaultSweepInterval is how often the recorded endpoints are compared
// with the served clusters.
const DefaultSweepInterval = 15 * time.Second

// Options configure Hosting.
type Options struct {
	// Address is the IP address every cluster listener is opened on.
	// Required. Without AdvertiseHost it is also the endpoints' host, so
	// it may be unspecified (0.0.0.0 or ::) only with an AdvertiseHost.
	Address netip.Addr
	// AdvertiseHost is the host recorded in every endpoint, which clients
	// dial and the serving certificates name: a DNS name resolving to this
	// process (a headless Service's, in an installed provider, so that the
	// endpoint outlives the pod's IP) or an IP address. Empty: Address.
	AdvertiseHost string
	// Ports are the ports cluster listeners take. Default DefaultPortRange.
	Ports PortRange
	// Secrets reads the clusters' CA Secrets; Secrets are not cached, so
	// this is the manager's API reader. Required.
	Secrets client.Reader
	// Endpoints lists the endpoints existing clusters recorded, so that a
	// new cluster is never given a port a cluster not yet reconciled since
	// a restart will ask for again, and so that a cluster whose
	// MonolithCluster is gone without a reconcile of its deletion
	// (`clusterctl move`) stops being served. Optional.
	Endpoints func(ctx context.Context) ([]clusterv1.APIEndpoint, error)
	// Own lists the clusters of this process's scope (namespace, watch
	// filter) that recorded an endpoint: each is served again at start and
	// at every sweep, whether or not its MonolithCluster is reconciled. A
	// paused cluster is not reconciled, and its port, left closed after a
	// restart, would be free for another process to take. Optional.
	Own func(ctx context.Context) ([]Recorded, error)
	// FirstRecorder returns the cluster whose MonolithCluster recorded
	// endpoint first (the oldest of those that record it), found false when
	// none does. A recorded endpoint is served only for that cluster, so
	// that two MonolithClusters naming one endpoint never race for its port
	// in whatever order a restart brings them. Optional.
	FirstRecorder func(ctx context.Context, endpoint clusterv1.APIEndpoint) (cluster types.NamespacedName, found bool, err error)
	// SweepInterval is how often served clusters are compared with the
	// recorded endpoints. Default DefaultSweepInterval.
	SweepInterval time.Duration
	// StateDir keeps each cluster's objects in a journal file
	// (journal.Path(StateDir, namespace, name)), so that they survive a
	// restart of the process: a cluster served again on its recorded
	// endpoint gets them back. Empty keeps them in memory only. Journals,
	// when set, wins.
	StateDir string
	// Limits bound each cluster's store (store.Limits; zero fields take
	// their defaults).
	Limits store.Limits
	// Journals keeps each cluster's objects (FileJournals, or Secrets of
	// the management cluster); nil: StateDir decides.
	Journals Journals
	// Leadership, when set, makes this Hosting one of several replicas
	// (see Leadership); nil: this process alone serves, and Hosting runs
	// only on the leader of its manager.
	Leadership *Leadership
	// LoadWorkers is how many clusters' stores are loaded from their
	// journals at once when a restarted or newly elected process serves
	// every recorded cluster. Default DefaultLoadWorkers.
	LoadWorkers int
	// Handler options; StoreFor is set by Hosting.
	Handler apiserver.Options
	// Log receives the listeners' lifecycle.
	Log logr.Logger
	// Now replaces time.Now for certificates.
	Now func() time.Time
}

// Recorded is a cluster and the endpoint its MonolithCluster records.
type Recorded struct {
	Cluster  types.NamespacedName
	Endpoint clusterv1.APIEndpoint
}

// Hosting serves the workload API of the clusters it is told to; safe for
// concurrent use. It is a manager Runnable: when the manager stops, every
// listener closes.
type Hosting struct {
	opts    Options
	handler http.Handler
	// collector runs every cluster's garbage collection on a few goroutines.
	collector *store.Collector
	base      context.Context
	stop      context.CancelFunc

	// controllers make the Pods of every served cluster run.
	controllers *controllers.Manager

	mu       sync.Mutex
	clusters map[types.NamespacedName]*Cluster
	byPort   map[int]*Cluster
	// reserved are the ports existing clusters recorded, loaded once
	// before the first port is handed out.
	reserved map[int]types.NamespacedName
	next     int
	// stopped is set once Start has returned: no cluster is served after.
	stopped bool
	// leading: clusters get their stores and are served here, not
	// forwarded. Always, without Options.Leadership.
	leading bool

	leaderMu   sync.Mutex
	leaderAddr string
	leaderAt   time.Time
}

// Cluster is one served workload cluster.
type Cluster struct {
	key      types.NamespacedName
	endpoint clusterv1.APIEndpoint
	// st is the cluster's store, nil while this replica forwards the
	// cluster's connections to the leader; ready is closed once it is set.
	st    atomic.Pointer[store.Store]
	ready chan struct{}
	// load is the store's load in flight, nil when none is; h.mu guards
	// it. Connections wait for the store meanwhile (route).
	load     *storeLoad
	served   *connListener
	journal  Journal // nil without Options.Journals
	listener net.Listener
	cancel   context.CancelFunc
	h        *Hosting
	started  time.Time

	// controllers run on the store while the cluster is served; set with
	// the store (a follower's forwarded cluster has neither).
	controllers atomic.Pointer[controllers.Cluster]

	tlsMu   sync.Mutex
	tls     *apiserver.ClusterTLS
	caPEM   []byte
	lastTry time.Time
	lastErr error

	etcdMu      sync.Mutex
	etcd        *etcd.Server
	etcdLastTry time.Time
	etcdLastErr error
}

// New returns Hosting with no cluster served.
func New(opts Options) (*Hosting, error) {
	if err := validateAddresses(&opts); err != nil {
		return nil, err
	}
	if opts.Ports == (PortRange{}) {
		opts.Ports = DefaultPortRange
	}
	if opts.Secrets == nil {
		return nil, errors.New("hosting: Options.Secrets is required")
	}
	if opts.Log.GetSink() == nil {
		opts.Log = logr.Discard()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.SweepInterval <= 0 {
		opts.SweepInterval = DefaultSweepInterval
	}
	if opts.LoadWorkers <= 0 {
		opts.LoadWorkers = DefaultLoadWorkers
	}
	if opts.Journals == nil && opts.StateDir != "" {
		opts.Journals = FileJournals{Dir: opts.StateDir, Log: opts.Log}
	}
	h := &Hosting{
		opts:     opts,
		clusters: map[types.NamespacedName]*Cluster{},
		byPort:   map[int]*Cluster{},
		next:     opts.Ports.First,
		leading:  opts.Leadership == nil,
	}
	h.base, h.stop = context.WithCancel(context.Background())
	h.collector = store.NewCollector(store.CollectorOptions{})
	h.controllers = controllers.New(controllers.Options{Log: opts.Log.WithName("controllers")})
	handlerOpts := opts.Handler
	handlerOpts.StoreFor = h.storeFor
	handlerOpts.PortForward = h.portForward
	if handlerOpts.Log.GetSink() == nil {
		handlerOpts.Log = opts.Log
	}
	handler, err := apiserver.New(handlerOpts)
	if err != nil {
		return nil, err
	}
	h.handler = h.durable(handler)
	return h, nil
}

// Start implements manager.Runnable: it stops serving clusters no
// MonolithCluster records any more, and closes every listener when ctx
// ends.
func (h *Hosting) Start(ctx context.Context) error {
	defer h.shutdown()
	if l := h.opts.Leadership; l != nil {
		go func() {
			select {
			case <-l.Elected:
				h.lead(ctx)
			case <-ctx.Done():
			}
		}()
	}
	ticker := time.NewTicker(h.opts.SweepInterval)
	defer ticker.Stop()
	h.serveOwn(ctx)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
			h.sweep(ctx)
			h.serveOwn(ctx)
		}
	}
}

// shutdown stops serving every cluster before Start returns, so that a
// stopped manager holds no port (a restarted one, or another process,
// may take it at once), and refuses to serve any after.
func (h *Hosting) shutdown() {
	h.stop()
	h.mu.Lock()
	h.stopped = true
	keys := slices.Collect(maps.Keys(h.clusters))
	h.mu.Unlock()
	for _, key := range keys {
		h.remove(key, true)
	}
	// Work left queued is finished from the journals after a restart.
	h.collector.Stop()
	h.controllers.Shutdown()
}

// serveOwn serves the clusters of Options.Own that are not served yet on
// their recorded endpoints, Options.LoadWorkers at a time. Their Nodes
// come back when their machines are reconciled (for a paused cluster, once
// it is unpaused); what matters here is that the endpoint stays this
// cluster's.
func (h *Hosting) serveOwn(ctx context.Context) {
	if h.opts.Own == nil {
		return
	}
	own, err := h.opts.Own(ctx)
	if err != nil {
		h.opts.Log.Error(err, "Failed to list the clusters to serve")
		return
	}
	own = slices.DeleteFunc(own, func(r Recorded) bool {
		return !r.Endpoint.IsValid() || !h.Hosts(r.Endpoint) || h.Cluster(r.Cluster) != nil
	})
	forEach(h.opts.LoadWorkers, own, func(r Recorded) {
		if _, err := h.Serve(ctx, r.Cluster, r.Endpoint); err != nil {
			// Another process may hold it for now (after clusterctl move,
			// the source's manager): tried again at the next sweep.
			h.opts.Log.V(2).Info("Not serving the cluster's recorded endpoint yet", "cluster", r.Cluster.String(), "reason", err.Error())
		}
	})
}

// sweep stops serving the clusters whose endpoint no MonolithCluster
// records: `clusterctl move` deletes the source's objects without their
// deletion being reconciled, and the target management cluster needs the
// port. A cluster served for less than the grace period is kept: its
// endpoint may not be recorded yet.
func (h *Hosting) sweep(ctx context.Context) {
	if h.opts.Endpoints == nil {
		return
	}
	endpoints, err := h.opts.Endpoints(ctx)
	if err != nil {
		h.opts.Log.Error(err, "Failed to list the recorded workload API endpoints")
		return
	}
	recorded := map[clusterv1.APIEndpoint]bool{}
	for _, e := range endpoints {
		recorded[e] = true
	}
	now := h.opts.Now()
	var stale []types.NamespacedName
	h.mu.Lock()
	for key, c := range h.clusters {
		if !recorded[c.endpoint] && now.Sub(c.started) > sweepGrace {
			stale = append(stale, key)
		}
	}
	h.mu.Unlock()
	for _, key := range stale {
		h.opts.Log.Info("No MonolithCluster records the endpoint any more", "cluster", key.String())
		h.Remove(key)
	}
}

// Serve makes sure cluster is served and returns its endpoint: the one it
// is served on already, the recorded one (want, after a restart), or a
// free port of the range. It returns ErrNotHosted for a recorded endpoint
// this process cannot serve, and ErrEndpointInUse for one another process
// holds. The cluster's listener is open at once; its store is loaded from
// its journal without holding up other clusters' calls, and Serve returns
// once it is (connections wait for it meanwhile).
func (h *Hosting) Serve(ctx context.Context, cluster types.NamespacedName, want clusterv1.APIEndpoint) (clusterv1.APIEndpoint, error) {
	c, fresh, err := h.listenFor(ctx, cluster, want)
	if err != nil {
		return clusterv1.APIEndpoint{}, err
	}
	// A cluster served for the first time (no recorded endpoint) starts
	// empty, whatever a journal of an earlier cluster of its name left.
	if err := h.loadStore(c, !fresh || want.IsValid()); err != nil {
		if fresh {
			h.remove(cluster, true)
		}
		return clusterv1.APIEndpoint{}, err
	}
	return c.endpoint, nil
}

// listenFor returns cluster's Cluster, listening on its endpoint; fresh
// when this call opened the listener.
func (h *Hosting) listenFor(ctx context.Context, cluster types.NamespacedName, want clusterv1.APIEndpoint) (*Cluster, bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped {
		return nil, false, ErrStopped
	}
	if c, ok := h.clusters[cluster]; ok {
		if want.IsValid() && want != c.endpoint {
			return nil, false, fmt.Errorf("cluster %s is served on %s, not on the recorded %s", cluster, endpointString(c.endpoint), endpointString(want))
		}
		return c, false, nil
	}
	if err := h.loadReserved(ctx); err != nil {
		return nil, false, err
	}
	if want.IsValid() {
		if !h.Hosts(want) {
			return nil, false, fmt.Errorf("%s: %w", endpointString(want), ErrNotHosted)
		}
		if h.opts.FirstRecorder != nil {
			first, found, err := h.opts.FirstRecorder(ctx, want)
			if err != nil {
				return nil, false, fmt.Errorf("failed to find which cluster recorded %s first: %w", endpointString(want), err)
			}
			if found && first != cluster {
				return nil, false, fmt.Errorf("cluster %s's recorded endpoint %s was recorded first by cluster %s: %w", cluster, endpointString(want), first, ErrEndpointInUse)
			}
		}
		l, err := h.listen(int(want.Port))
		if errors.Is(err, syscall.EADDRINUSE) {
			return nil, false, fmt.Errorf("cluster %s's recorded endpoint %s: %w", cluster, endpointString(want), ErrEndpointInUse)
		}
		if err != nil {
			return nil, false, fmt.Errorf("failed to listen on the recorded endpoint of cluster %s: %w", cluster, err)
		}
		return h.start(cluster, l), true, nil
	}
	for range h.opts.Ports.Size() {
		port := h.next
		h.next++
		if h.next > h.opts.Ports.Last {
			h.next = h.opts.Ports.First
		}
		if _, taken := h.byPort[port]; taken {
			continue
		}
		if owner, taken := h.reserved[port]; taken && owner != cluster {
			continue
		}
		l, err := h.listen(port)
		if err != nil {
			// Another process has it: try the next one.
			continue
		}
		return h.start(cluster, l), true, nil
	}
	return nil, false, fmt.Errorf("no free port left in %s on %s for cluster %s", h.opts.Ports, h.opts.Address, cluster)
}

func endpointString(e clusterv1.APIEndpoint) string {
	return net.JoinHostPort(e.Host, strconv.Itoa(int(e.Port)))
}

// loadReserved reads the endpoints existing clusters recorded, once.
func (h *Hosting) loadReserved(ctx context.Context) error {
	if h.reserved != nil {
		return nil
	}
	reserved := map[int]types.NamespacedName{}
	if h.opts.Endpoints != nil {
		endpoints, err := h.opts.Endpoints(ctx)
		if err != nil {
			return fmt.Errorf("failed to list the recorded workload API endpoints: %w", err)
		}
		for _, e := range endpoints {
			if h.Hosts(e) {
				// Whose it is does not matter: no new cluster takes it.
				reserved[int(e.Port)] = types.NamespacedName{}
			}
		}
	}
	h.reserved = reserved
	return nil
}

func (h *Hosting) listen(port int) (net.Listener, error) {
	var lc net.ListenConfig
	return lc.Listen(h.base, "tcp", netip.AddrPortFrom(h.opts.Address, uint16(port)).String())
}

// start serves cluster on l, its store not loaded yet (loadStore);
// h.mu is held.
func (h *Hosting) start(key types.NamespacedName, l net.Listener) *Cluster {
	port := l.Addr().(*net.TCPAddr).Port
	ctx, cancel := context.WithCancel(h.base)
	c := &Cluster{
		key:      key,
		endpoint: clusterv1.APIEndpoint{Host: h.opts.AdvertiseHost, Port: int32(port)},
		ready:    make(chan struct{}),
		listener: l,
		cancel:   cancel,
		h:        h,
		started:  h.opts.Now(),
	}
	h.clusters[key] = c
	h.byPort[port] = c
	delete(h.reserved, port)
	log := h.opts.Log.WithValues("cluster", key.String(), "endpoint", endpointString(c.endpoint))
	if !h.leading {
		log.Info("Forwarding the workload API to the leader")
	}
	cfg := apiserver.TLSConfig(func(*tls.ClientHelloInfo) (*apiserver.ClusterTLS, error) {
		return c.loadTLS(ctx)
	})
	c.served = newConnListener(l.(*net.TCPListener), func(conn net.Conn) bool {
		if c.Store() != nil {
			return false
		}
		go h.route(ctx, c, conn)
		return true
	})
	// One goroutine per cluster: the HTTP server's accept loop.
	go func() {
		if err := apiserver.Serve(ctx, c.served, h.handler, cfg); err != nil {
			log.Error(err, "The workload API listener stopped")
		}
	}()
	return c
}

// openStore makes cluster's store, kept in its journal when
// Options.Journals is set. A cluster served for the first time (no
// recorded endpoint: never served) starts empty, whatever a journal of an
// earlier cluster of the same name left.
func (h *Hosting) openStore(ctx context.Context, key types.NamespacedName, resume bool) (*store.Store, Journal, error) {
	if h.opts.Journals == nil {
		return store.New(h.storeOptions()), nil, nil
	}
	j, restored, lastRV, err := h.opts.Journals.Open(ctx, key, resume)
	if err != nil {
		return nil, nil, fmt.Errorf("failed to read the objects of cluster %s: %w", key, err)
	}
	if len(restored) > 0 {
		h.opts.Log.Info("Restored the workload cluster's objects", "cluster", key.String(), "objects", len(restored))
	}
	// Versions only go forward: past what the journal recorded (a
	// deletion's included) and past the clock, as a fresh store.
	initial := max(lastRV, uint64(h.opts.Now().UnixMicro()))
	opts := h.storeOptions()
	opts.Restored, opts.Journal, opts.InitialResourceVersion = restored, j, initial
	return store.New(opts), j, nil
}

func (h *Hosting) storeOptions() store.Options {
	return store.Options{Collector: h.collector, Limits: h.opts.Limits}
}

// Hosts reports whether endpoint is one this process serves clusters on
// (its address and port range), whether or not a cluster is served there
// now.
func (h *Hosting) Hosts(endpoint clusterv1.APIEndpoint) bool {
	return endpoint.Host == h.opts.AdvertiseHost && h.opts.Ports.Contains(int(endpoint.Port))
}

// Cluster returns the served cluster, or nil.
func (h *Hosting) Cluster(key types.NamespacedName) *Cluster {
	h.mu.Lock()
	defer h.mu.Unlock()
	if c := h.clusters[key]; c != nil && c.Store() != nil {
		return c
	}
	return nil
}

// Remove stops serving cluster: its listener closes, its open watches end
// and its store is dropped, journal included: the cluster is gone.
// Removing a cluster not served does nothing.
func (h *Hosting) Remove(key types.NamespacedName) { h.remove(key, false) }

// remove stops serving cluster; keep closes its journal for the next
// start rather than removing it.
func (h *Hosting) remove(key types.NamespacedName, keep bool) {
	h.mu.Lock()
	c, ok := h.clusters[key]
	var load *storeLoad
	if ok {
		delete(h.clusters, key)
		delete(h.byPort, int(c.endpoint.Port))
		load = c.load
	}
	h.mu.Unlock()
	if !ok {
		return
	}
	if load != nil {
		// Its store and journal are closed with the others below.
		<-load.done
	}
	c.cancel()
	if ctl := c.controllers.Load(); ctl != nil {
		ctl.Stop()
	}
	_ = c.listener.Close()
	_ = c.served.Close()
	c.closeEtcd()
	if st := c.Store(); st != nil {
		st.Close()
	}
	if c.journal != nil {
		closeJournal := c.journal.Discard
		if keep {
			closeJournal = c.journal.Close
		}
		if err := closeJournal(); err != nil {
			h.opts.Log.Error(err, "Failed to close the workload cluster's journal", "cluster", key.String())
		}
	}
	h.opts.Log.Info("Stopped serving the workload API", "cluster", key.String(), "endpoint", endpointString(c.endpoint))
}

// Len is the number of clusters served.
func (h *Hosting) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.clusters)
}

// clusterOf resolves a request to the cluster whose listener accepted it.
func (h *Hosting) clusterOf(r *http.Request) (*Cluster, error) {
	addr, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return nil, errors.New("the request carries no local address")
	}
	tcp, ok := addr.(*net.TCPAddr)
	if !ok {
		return nil, fmt.Errorf("the request came in on %s, not a TCP listener", addr)
	}
	h.mu.Lock()
	c := h.byPort[tcp.Port]
	h.mu.Unlock()
	if c == nil {
		return nil, apierrors.NewServiceUnavailable("this cluster's workload API is being removed")
	}
	return c, nil
}

// portForward connects a pods/portforward stream as the kubelet would: the
// only port anything listens on in a simulated node is an etcd member's
// client port, which Cluster API's control plane provider checks.
func (h *Hosting) portForward(r *http.Request, namespace, pod string, port int32) (net.Conn, error) {
	c, err := h.clusterOf(r)
	if err != nil {
		return nil, err
	}
	switch {
	case namespace == metav1.NamespaceSystem && strings.HasPrefix(pod, etcd.PodPrefix) && port == etcdClientPort:
		server, err := c.etcdServer(r.Context())
		if err != nil {
			return nil, err
		}
		return server.Dial(r.Context(), pod)
	case namespace == metav1.NamespaceSystem && strings.HasPrefix(pod, kubeAPIServerPodPrefix):
		return c.kubeAPIServerHandshake(r.Context())
	default:
		return nil, fmt.Errorf("nothing listens on port %d of Pod %s/%s: only etcd members' client port %d and kube-apiserver's TLS handshake are simulated",
			port, namespace, pod, etcdClientPort)
	}
}

// kubeAPIServerPodPrefix names kubeadm's kube-apiserver static Pods.
const kubeAPIServerPodPrefix = "kube-apiserver-"

// handshakeTimeout bounds a connection to a simulated kube-apiserver Pod.
const handshakeTimeout = 30 * time.Second

// kubeAPIServerHandshake answers a port-forward to a kube-apiserver Pod
// with the TLS handshake of the cluster's serving certificate: Cluster
// API's control plane provider connects so to read the certificate's
// expiry, and sends nothing after it.
func (c *Cluster) kubeAPIServerHandshake(ctx context.Context) (net.Conn, error) {
	t, err := c.loadTLS(ctx)
	if err != nil {
		return nil, err
	}
	client, server := net.Pipe()
	go func() {
		conn := tls.Server(server, &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{t.Certificate}})
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(handshakeTimeout))
		if err := conn.Handshake(); err != nil {
			return
		}
		// Nothing is served on it: wait for the client to close.
		_, _ = io.Copy(io.Discard, conn)
	}()
	return client, nil
}

// storeFor resolves a request to the store of the cluster whose listener
// accepted it.
func (h *Hosting) storeFor(r *http.Request) (*store.Store, error) {
	c, err := h.clusterOf(r)
	if err != nil {
		return nil, err
	}
	st := c.Store()
	if st == nil {
		return nil, apierrors.NewServiceUnavailable("this cluster's workload API is being loaded")
	}
	return st, nil
}

// Key names the cluster.
func (c *Cluster) Key() types.NamespacedName { return c.key }

// Endpoint is where the cluster is served.
func (c *Cluster) Endpoint() clusterv1.APIEndpoint { return c.endpoint }

// Store holds the cluster's workload objects.
func (c *Cluster) Store() *store.Store { return c.st.Load() }

func (c *Cluster) setStore(st *store.Store) {
	c.st.Store(st)
	c.controllers.Store(c.h.controllers.Add(c.key.String(), st))
	close(c.ready)
}

// CACertificate returns the PEM of the cluster CA, reading the
// `<cluster>-ca` Secret if it was not read yet.
func (c *Cluster) CACertificate(ctx context.Context) ([]byte, error) {
	if _, err := c.loadTLS(ctx); err != nil {
		return nil, err
	}
	c.tlsMu.Lock()
	defer c.tlsMu.Unlock()
	return c.caPEM, nil
}

// loadTLS returns the cluster's listener material, made from its CA
// Secret on first use: Cluster API's control plane provider writes that
// Secret after the endpoint is known, so the listener opens before it and
// refuses handshakes until it exists.
func (c *Cluster) loadTLS(ctx context.Context) (*apiserver.ClusterTLS, error) {
	c.tlsMu.Lock()
	defer c.tlsMu.Unlock()
	if c.tls != nil {
		return c.tls, nil
	}
	now := c.h.opts.Now()
	if c.lastErr != nil && now.Sub(c.lastTry) < caRetry {
		return nil, c.lastErr
	}
	c.lastTry = now
	cert, key, err := c.readKeyPair(ctx, secret.ClusterCA)
	if err != nil {
		c.lastErr = err
		return nil, err
	}
	t, err := apiserver.NewClusterTLS(cert, key, c.h.certificateHosts(), now)
	if err != nil {
		c.lastErr = fmt.Errorf("the CA of cluster %s: %w", c.key, err)
		return nil, c.lastErr
	}
	c.tls, c.caPEM, c.lastErr = t, cert, nil
	return t, nil
}

// etcdClientPort is where an etcd member serves clients (kubeadm's
// listen-client-urls).
const etcdClientPort = 2379

// etcdServer returns the cluster's etcd, made on first use from its
// `<cluster>-etcd` Secret, which the control plane provider writes with
// the other cluster certificates.
func (c *Cluster) etcdServer(ctx context.Context) (*etcd.Server, error) {
	c.etcdMu.Lock()
	defer c.etcdMu.Unlock()
	if c.etcd != nil {
		return c.etcd, nil
	}
	now := c.h.opts.Now()
	if c.etcdLastErr != nil && now.Sub(c.etcdLastTry) < caRetry {
		return nil, c.etcdLastErr
	}
	c.etcdLastTry = now
	cert, key, err := c.readKeyPair(ctx, secret.EtcdCA)
	if err != nil {
		c.etcdLastErr = err
		return nil, err
	}
	server, err := etcd.New(etcd.Options{
		Store: c.Store(), CACertPEM: cert, CAKeyPEM: key, Now: c.h.opts.Now,
		Log: c.h.opts.Log.WithValues("cluster", c.key.String()),
	})
	if err != nil {
		c.etcdLastErr = fmt.Errorf("the etcd of cluster %s: %w", c.key, err)
		return nil, c.etcdLastErr
	}
	c.etcd, c.etcdLastErr = server, nil
	return server, nil
}

func (c *Cluster) closeEtcd() {
	c.etcdMu.Lock()
	defer c.etcdMu.Unlock()
	if c.etcd != nil {
		c.etcd.Close()
		c.etcd = nil
	}
}

// readKeyPair reads tls.crt and tls.key of the cluster's Secret of purpose.
func (c *Cluster) readKeyPair(ctx context.Context, purpose secret.Purpose) (cert, key []byte, err error) {
	ctx, cancel := context.WithTimeout(ctx, secretTimeout)
	defer cancel()
	s := &corev1.Secret{}
	name := secret.Name(c.key.Name, purpose)
	if err := c.h.opts.Secrets.Get(ctx, client.ObjectKey{Namespace: c.key.Namespace, Name: name}, s); err != nil {
		return nil, nil, fmt.Errorf("failed to read Secret %s/%s: %w", c.key.Namespace, name, err)
	}
	cert, key = s.Data[secret.TLSCrtDataName], s.Data[secret.TLSKeyDataName]
	if len(cert) == 0 || len(key) == 0 {
		return nil, nil, fmt.Errorf("secret %s/%s has no %s and %s", c.key.Namespace, name, secret.TLSCrtDataName, secret.TLSKeyDataName)
	}
	return cert, key, nil
}
