package store

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"runtime"
	"strconv"
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

// BenchmarkKubeadmLikeStoreMemory reports the heap of a store holding what
// a small kubeadm cluster (1 control plane + 3 workers) shows: Nodes, the
// static and system Pods, a few ConfigMaps and Leases, with a full history.
func BenchmarkKubeadmLikeStoreMemory(b *testing.B) {
	const n = 50
	pods := Resource{Resource: "pods", Namespaced: true}
	nodes := Resource{Resource: "nodes"}
	configMaps := Resource{Resource: "configmaps", Namespaced: true}
	leases := Resource{Group: "coordination.k8s.io", Resource: "leases", Namespaced: true}
	obj := func(apiVersion, kind, ns, name string, extra map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind}}
		for k, v := range extra {
			u.Object[k] = v
		}
		u.SetNamespace(ns)
		u.SetName(name)
		u.SetLabels(map[string]string{"app": name})
		return u
	}
	populate := func(s *Store) {
		machines := []string{"cp-0", "w-0", "w-1", "w-2"}
		for _, m := range machines {
			mustCreate(b, s, nodes, obj("v1", "Node", "", m, map[string]any{
				"spec": map[string]any{"providerID": "in-memory://" + m},
				"status": map[string]any{
					"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "KubeletReady"}},
					"nodeInfo":   map[string]any{"kubeletVersion": "v1.36.3"},
					"addresses":  []any{map[string]any{"type": "InternalIP", "address": "10.128.0.2"}},
				},
			}))
			mustCreate(b, s, pods, obj("v1", "Pod", "kube-system", "kube-proxy-"+m, map[string]any{
				"spec": map[string]any{"nodeName": m, "containers": []any{map[string]any{"name": "kube-proxy", "image": "registry.k8s.io/kube-proxy:v1.36.3"}}},
			}))
			mustCreate(b, s, leases, obj("coordination.k8s.io/v1", "Lease", "kube-node-lease", m, map[string]any{
				"spec": map[string]any{"holderIdentity": m},
			}))
		}
		for _, c := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "etcd"} {
			mustCreate(b, s, pods, obj("v1", "Pod", "kube-system", c+"-cp-0", map[string]any{
				"spec": map[string]any{"nodeName": "cp-0", "containers": []any{map[string]any{"name": c, "image": "registry.k8s.io/" + c + ":v1.36.3"}}},
			}))
		}
		for _, c := range []string{"kubeadm-config", "kubelet-config", "kube-proxy", "coredns"} {
			mustCreate(b, s, configMaps, obj("v1", "ConfigMap", "kube-system", c, map[string]any{
				"data": map[string]any{"config": "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nkubernetesVersion: v1.36.3\n"},
			}))
		}
	}
	for _, churn := range []bool{false, true} {
		name := "settled"
		if churn {
			name = "full-history-of-lease-renewals"
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				stores := make([]*Store, n)
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				for i := range stores {
					stores[i] = New(Options{})
					populate(stores[i])
					if churn {
						renewLeases(b, stores[i], leases, DefaultHistorySize)
					}
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "bytes/store")
				runtime.KeepAlive(stores)
			}
		})
	}
}

// renewLeases updates the node Leases' renewTime rounds times, as kubelets
// do every 10 s, so that the history is full of old versions (the worst
// case of memory per store: old versions of small objects kept alive).
func renewLeases(b *testing.B, s *Store, leases Resource, rounds int) {
	for i := range rounds {
		l, err := s.Get(leases, "kube-node-lease", []string{"cp-0", "w-0", "w-1", "w-2"}[i%4])
		if err != nil {
			b.Fatal(err)
		}
		if err := unstructured.SetNestedField(l.Object, "2026-11-27T13:00:"+strconv.Itoa(10+i%50)+".000000Z", "spec", "renewTime"); err != nil {
			b.Fatal(err)
		}
		if _, err := s.Update(leases, l); err != nil {
			b.Fatal(err)
		}
	}
}

func mustCreate(b *testing.B, s *Store, res Resource, obj *unstructured.Unstructured) {
	if _, err := s.Create(res, obj); err != nil {
		b.Fatal(err)
	}
}
