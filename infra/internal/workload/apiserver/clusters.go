package apiserver

import (
	"crypto/tls"
	"net/http"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
)

// Clusters is the set of clusters one listener serves, told apart by the
// TLS server name (SNI) clients send. Its TLSFor and StoreFor resolve the
// same name for the handshake and for the requests on that connection, so
// a client reaches only the store of the cluster whose CA signed its
// certificate (the Host header plays no part). The zero value is empty and
// ready.
type Clusters struct {
	mu       sync.RWMutex
	clusters map[string]*servedCluster
}

type servedCluster struct {
	store *store.Store
	tls   *ClusterTLS
}

// Set serves a cluster's store under a server name, with its TLS material.
func (c *Clusters) Set(serverName string, s *store.Store, t *ClusterTLS) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.clusters == nil {
		c.clusters = map[string]*servedCluster{}
	}
	c.clusters[serverName] = &servedCluster{store: s, tls: t}
}

// Remove stops serving a cluster and ends its open watches; new
// connections for it fail the handshake and requests on open ones get 404.
func (c *Clusters) Remove(serverName string) {
	c.mu.Lock()
	sc, ok := c.clusters[serverName]
	delete(c.clusters, serverName)
	c.mu.Unlock()
	if ok {
		sc.store.Close()
	}
}

func (c *Clusters) get(serverName string) (*servedCluster, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	sc, ok := c.clusters[serverName]
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "clusters"}, serverName)
	}
	return sc, nil
}

// TLSFor is the forClient of TLSConfig.
func (c *Clusters) TLSFor(hello *tls.ClientHelloInfo) (*ClusterTLS, error) {
	sc, err := c.get(hello.ServerName)
	if err != nil {
		return nil, err
	}
	return sc.tls, nil
}

// StoreFor is Options.StoreFor: the store of the connection's server name.
func (c *Clusters) StoreFor(r *http.Request) (*store.Store, error) {
	if r.TLS == nil {
		return nil, apierrors.NewBadRequest("the workload API is served over TLS only")
	}
	sc, err := c.get(r.TLS.ServerName)
	if err != nil {
		return nil, err
	}
	return sc.store, nil
}
