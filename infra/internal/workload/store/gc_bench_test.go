package store

import (
	"strconv"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// BenchmarkCollectDependents measures the garbage collection of an owner's
// 1,000 dependents after a background deletion, per dependent.
func BenchmarkCollectDependents(b *testing.B) {
	const n = 1000
	for b.Loop() {
		b.StopTimer()
		s := New(Options{})
		owner, err := s.Create(nodes, node("n"))
		if err != nil {
			b.Fatal(err)
		}
		for i := range n {
			p := pod("default", "p"+strconv.Itoa(i), "n", nil)
			p.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "n", UID: owner.GetUID()}})
			if _, err := s.Create(pods, p); err != nil {
				b.Fatal(err)
			}
		}
		w, err := s.Watch(pods, "", WatchOptions{ResourceVersion: s.ResourceVersion()})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if _, _, err := s.Delete(nodes, "", "n", Preconditions{}); err != nil {
			b.Fatal(err)
		}
		for deleted := 0; deleted < n; {
			if e := <-w.ResultChan(); e.Type == watch.Deleted {
				deleted++
			}
		}
		b.StopTimer()
		w.Stop()
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/dependent")
}
