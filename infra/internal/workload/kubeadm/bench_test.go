package kubeadm

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
)

// BenchmarkClusterMemory reports the heap of a store holding what Ensure
// makes for a cluster of 1 control plane + 3 workers, settled (the history
// holds the creations, as after a rebuild).
func BenchmarkClusterMemory(b *testing.B) {
	const n = 50
	c := Cluster{Name: "c", ControlPlaneEndpoint: "c.local:6443", KubernetesVersion: "v1.36.3", PodSubnet: "192.168.0.0/16"}
	for b.Loop() {
		stores := make([]*store.Store, n)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for i := range stores {
			stores[i] = store.New(store.Options{})
			for _, node := range []Node{controlPlaneNode("cp-0", "10.0.0.10"), workerNode("w-0", "10.0.1.10"), workerNode("w-1", "10.0.1.11"), workerNode("w-2", "10.0.1.12")} {
				if err := Ensure(context.Background(), stores[i], c, node); err != nil {
					b.Fatal(err)
				}
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "bytes/cluster")
		runtime.KeepAlive(stores)
	}
}

// BenchmarkEnsureExisting is the cost of an Ensure that finds everything
// there, what every reconcile of a provisioned machine pays.
func BenchmarkEnsureExisting(b *testing.B) {
	c := Cluster{Name: "c", ControlPlaneEndpoint: "c.local:6443", KubernetesVersion: "v1.36.3"}
	s := store.New(store.Options{})
	nodes := []Node{controlPlaneNode("cp-0", "10.0.0.10")}
	for i := range 3 {
		nodes = append(nodes, workerNode(fmt.Sprintf("w-%d", i), fmt.Sprintf("10.0.1.%d", i)))
	}
	for _, n := range nodes {
		if err := Ensure(context.Background(), s, c, n); err != nil {
			b.Fatal(err)
		}
	}
	for _, n := range []Node{nodes[0], nodes[1]} {
		b.Run(map[bool]string{true: "control-plane", false: "worker"}[n.ControlPlane], func(b *testing.B) {
			for b.Loop() {
				if err := Ensure(context.Background(), s, c, n); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
