package store

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
)

// An observer sees every change in order, with the object before and
// after, until it stops.
func TestObserversSeeEveryChangeUntilStopped(t *testing.T) {
	g := NewWithT(t)
	s := New(Options{})
	cms := Resource{Resource: "configmaps", Namespaced: true}
	type seen struct {
		typ        watch.EventType
		rv, prevRV string
	}
	var got []seen
	stop := s.Observe(func(ch Change) {
		if ch.Resource != cms {
			return
		}
		prev := ""
		if ch.Previous != nil {
			prev = ch.Previous.GetResourceVersion()
		}
		got = append(got, seen{ch.Type, ch.Object.GetResourceVersion(), prev})
	})
	cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "a", "namespace": "default"}}}
	created, err := s.Create(cms, cm)
	g.Expect(err).NotTo(HaveOccurred())
	created.Object["data"] = map[string]any{"k": "v"}
	updated, err := s.Update(cms, created)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = s.Update(cms, updated) // no change: not seen
	g.Expect(err).NotTo(HaveOccurred())
	deleted, _, err := s.Delete(cms, "default", "a", Preconditions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal([]seen{
		{watch.Added, created.GetResourceVersion(), ""},
		{watch.Modified, updated.GetResourceVersion(), created.GetResourceVersion()},
		{watch.Deleted, deleted.GetResourceVersion(), updated.GetResourceVersion()},
	}))

	stop()
	_, err = s.Create(cms, cm)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(HaveLen(3))
}
