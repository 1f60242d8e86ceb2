package apiserver

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
	"github.com/capi-monolith/capi-monolith/test/envtest"
)

// heapInUse is the live heap after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// cpuTime is the process's user and system CPU time: the machine is
// shared, so wall time says little.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
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
		cpu := cpuTime(b)
		for _, n := range names {
			if err := clients[n](); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64((cpuTime(b)-cpu).Milliseconds())/clusters, "cpu-ms/CRD")
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

// BenchmarkInstallClusterAPICRDs creates Cluster API's CRDs (the ones
// envtest installs, among the largest CRDs in use) one after the other in
// one cluster, as clusterctl or a ClusterResourceSet would, and reports
// what the cluster then keeps.
func BenchmarkInstallClusterAPICRDs(b *testing.B) {
	dir, err := envtest.ClusterAPICRDDirectory()
	if err != nil {
		b.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		b.Fatalf("no CRDs in %s: %v", dir, err)
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, f := range files {
		body, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(body, crd); err != nil {
			b.Fatal(err)
		}
		crds = append(crds, crd)
	}
	for range b.N {
		b.StopTimer()
		ts := startServer(b, store.Options{}, "c1")
		client := crdClient(b, ts.restConfig(b, "c1")).ApiextensionsV1().CustomResourceDefinitions()
		before := heapInUse()
		cpu := cpuTime(b)
		b.StartTimer()
		for _, crd := range crds {
			if _, err := client.Create(context.Background(), crd.DeepCopy(), metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		b.ReportMetric(float64(len(crds)), "CRDs")
		b.ReportMetric(float64((cpuTime(b) - cpu).Milliseconds()), "cpu-ms")
		b.ReportMetric(float64(heapInUse()-before)/(1<<20), "MiB")
		b.StartTimer()
	}
}
