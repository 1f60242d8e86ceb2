package apiserver_test

import (
	"context"
	"net"
	"time"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/apiserver"
	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
)

// Example shows the wiring the inMemory backend is to do: one store per
// cluster, its listener material from the <cluster>-ca Secret, and one TLS
// listener serving every cluster by its server name.
func Example() {
	var caCertPEM, caKeyPEM []byte // the tls.crt and tls.key of <cluster>-ca

	clusters := &apiserver.Clusters{}
	clusterTLS, err := apiserver.NewClusterTLS(caCertPEM, caKeyPEM, []string{"dev.default.workload.local"}, time.Now())
	if err != nil {
		return // (this example has no CA)
	}
	clusters.Set("dev.default.workload.local", store.New(store.Options{}), clusterTLS)

	handler, err := apiserver.New(apiserver.Options{StoreFor: clusters.StoreFor})
	if err != nil {
		return
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = apiserver.Serve(ctx, l, handler, apiserver.TLSConfig(clusters.TLSFor)) }()

	// When the cluster is deleted:
	clusters.Remove("dev.default.workload.local")
}
