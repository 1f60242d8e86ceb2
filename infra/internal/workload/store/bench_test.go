package store

import (
	"runtime"
	"testing"
)

// BenchmarkEmptyStoreMemory reports the heap an empty cluster store (its
// four initial namespaces, no watchers) holds, for sizing hundreds of
// clusters.
func BenchmarkEmptyStoreMemory(b *testing.B) {
	const n = 200
	for b.Loop() {
		stores := make([]*Store, n)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for i := range stores {
			stores[i] = New(Options{})
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "bytes/store")
		runtime.KeepAlive(stores)
	}
}
