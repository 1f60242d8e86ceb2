package controllers

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/kubeadm"
	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
)

// BenchmarkClusterCost reports what the controllers add to clusters
// holding only kubeadm's objects (1 control plane + 3 workers, as
// kubeadm's BenchmarkClusterMemory): the heap and goroutines per cluster
// once settled (with and without controllers), and the writes they made
// (CoreDNS's ReplicaSet and two Pods, Node pod CIDRs, kube-proxy status),
// and the CPU time of registering the Nodes and settling; then the heap
// per cluster once the watch history has aged out (store.Options.HistoryAge
// later, one ConfigMap written), which is what a quiet cluster holds.
func BenchmarkClusterCost(b *testing.B) {
	const n = 100
	for _, withControllers := range []bool{false, true} {
		b.Run("controllers="+strconv.FormatBool(withControllers), func(b *testing.B) {
			for b.Loop() {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				goroutines := runtime.NumGoroutine()
				m := New(Options{})
				var clock fakeClock
				cpu0 := cpuTime()
				stores := make([]*store.Store, n)
				var rvBefore, rvAfter uint64
				for i := range stores {
					stores[i] = store.New(store.Options{Now: clock.Now})
					if withControllers {
						m.Add(fmt.Sprint(i), stores[i])
					}
					for _, node := range []kubeadm.Node{benchNode("cp-0", true, 10), benchNode("w-0", false, 20), benchNode("w-1", false, 21), benchNode("w-2", false, 22)} {
						if err := kubeadm.Ensure(context.Background(), stores[i], testCluster, node); err != nil {
							b.Fatal(err)
						}
					}
				}
				for _, s := range stores {
					rv, _ := strconv.ParseUint(s.ResourceVersion(), 10, 64)
					rvBefore += rv
				}
				if withControllers {
					settle(b, m, stores)
				}
				for _, s := range stores {
					rv, _ := strconv.ParseUint(s.ResourceVersion(), 10, 64)
					rvAfter += rv
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/n, "bytes/cluster")
				b.ReportMetric(float64(runtime.NumGoroutine()-goroutines)/n, "goroutines/cluster")
				b.ReportMetric(float64(rvAfter-rvBefore)/n, "writes-after-ensure/cluster")
				clock.Advance(store.DefaultHistoryAge + time.Second)
				for _, s := range stores {
					cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}}
					cm.SetNamespace(metav1.NamespaceDefault)
					cm.SetName("aged")
					if _, err := s.Create(configMaps, cm); err != nil {
						b.Fatal(err)
					}
				}
				var aged runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&aged)
				b.ReportMetric(float64(int64(aged.HeapAlloc)-int64(before.HeapAlloc))/n, "bytes/cluster-history-aged")
				b.ReportMetric(float64((cpuTime()-cpu0).Milliseconds())/n, "cpu-ms/cluster")
				runtime.KeepAlive(stores)
				m.Shutdown()
			}
		})
	}
}

// fakeClock is time.Now plus what Advance added, safe for concurrent use.
type fakeClock struct {
	mu     sync.Mutex
	offset time.Duration
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset += d
}

// cpuTime is the process's CPU time: the machine is shared, wall time says little.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func benchNode(name string, cp bool, ip int) kubeadm.Node {
	n := kubeadm.Node{Name: name, ProviderID: "inmemory://" + name, KubeletVersion: version, ControlPlane: cp,
		Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("10.0.0.%d", ip)}}}
	if !cp {
		n.Taints = &[]corev1.Taint{}
	}
	return n
}

// settle waits for every cluster's CoreDNS to be rolled out and the queue
// to be empty.
func settle(b *testing.B, m *Manager, stores []*store.Store) {
	deadline := time.Now().Add(time.Minute)
	for _, s := range stores {
		for {
			u, err := s.Get(deployments, metav1.NamespaceSystem, "coredns")
			if err == nil {
				d, err := typed[appsv1.Deployment](u)
				if err == nil && rolledOut(d) && d.Status.UpdatedReplicas == 2 {
					if rs, _, _ := s.List(replicaSets, metav1.NamespaceSystem, store.ListOptions{}); len(rs) > 0 {
						break
					}
				}
			}
			if time.Now().After(deadline) {
				b.Fatal("CoreDNS was not rolled out in a minute")
			}
			time.Sleep(time.Millisecond)
		}
	}
	for m.queue.Len() > 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
}
