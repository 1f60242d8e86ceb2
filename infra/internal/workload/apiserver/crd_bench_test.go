package apiserver

import (
	"context"
	"net/http"
	"runtime"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
)

// heapInUse is the live heap after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkCRDRegistryPerCluster reports what the CRD registry keeps for
// a cluster without CRDs (the set read from its store on its first
// request), over 500 clusters.
func BenchmarkCRDRegistryPerCluster(b *testing.B) {
	const clusters = 500
	for range b.N {
		h, err := New(Options{StoreFor: func(*http.Request) (*store.Store, error) { return nil, nil }})
		if err != nil {
			b.Fatal(err)
		}
		stores := make([]*store.Store, clusters)
		for i := range stores {
			stores[i] = store.New(store.Options{})
		}
		before := heapInUse()
		for _, st := range stores {
			if _, err := h.crds.set(st); err != nil {
				b.Fatal(err)
			}
		}
		after := heapInUse()
		b.ReportMetric(float64(after-before)/clusters, "B/cluster")
		runtime.KeepAlive(stores)
	}
}

// BenchmarkCRDServing reports what serving one CRD (widgetCRD: two served
// versions, schemas, a CEL rule) keeps per cluster, and how long its
// creation takes (validation, status, the set made again).
func BenchmarkCRDServing(b *testing.B) {
	const clusters = 20
	names := make([]string, clusters)
	for i := range names {
		names[i] = "c" + string(rune('a'+i))
	}
	ts := startServer(b, store.Options{}, names...)
	ctx := context.Background()
	clients := make(map[string]func() error, clusters)
	for _, n := range names {
		c := crdClient(b, ts.restConfig(b, n)).ApiextensionsV1().CustomResourceDefinitions()
		clients[n] = func() error {
			_, err := c.Create(ctx, widgetCRD(), metav1.CreateOptions{})
			return err
		}
	}
	b.ResetTimer()
	for range b.N {
		before := heapInUse()
		for _, n := range names {
			if err := clients[n](); err != nil {
				b.Fatal(err)
			}
		}
		after := heapInUse()
		b.ReportMetric(float64(after-before)/clusters, "B/CRD")
		b.StopTimer()
		for _, n := range names {
			if err := crdClient(b, ts.restConfig(b, n)).ApiextensionsV1().CustomResourceDefinitions().Delete(ctx, "widgets.example.com", metav1.DeleteOptions{}); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
	}
}
