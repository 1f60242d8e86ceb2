package store

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func configMap(name string, data string) *unstructured.Unstructured {
	u := object("v1", "ConfigMap", "default", name)
	u.Object["data"] = map[string]any{"v": data}
	return u
}

func TestBytesAreTheEncodedLength(t *testing.T) {
	g := NewWithT(t)
	s := New(Options{InitialNamespaces: []string{"default"}})
	values := []any{
		nil, true, false, "", "plain", `quo"te\back`, "<html>&amp;", "tab\tnew\nline\r\b\f\x01\x1f",
		"héllo wörld ✓", "\u2028\u2029", int64(0), int64(-42), int64(math.MaxInt64),
		1.5, 0.1, 1e-7, 1e21, 123456789.125, -0.000001, 1e20,
		map[string]any{}, []any{}, []any{int64(1), "a", nil, map[string]any{"k<": []any{}}},
		map[string]any{"metadata": map[string]any{"name": "x", "labels": map[string]any{"a": "b", "c&": "d"}}, "n": 2.5},
	}
	for i, v := range values {
		cm := configMap(fmt.Sprintf("cm%d", i), "")
		cm.Object["data"] = map[string]any{"v": v}
		create(g, s, configMaps, cm)
	}
	var want int64
	for _, res := range []Resource{Namespaces, configMaps} {
		items, _, err := s.List(res, "", ListOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		for _, item := range items {
			b, err := json.Marshal(item.Object)
			g.Expect(err).NotTo(HaveOccurred())
			want += int64(len(b))
		}
	}
	g.Expect(s.Usage().Bytes).To(Equal(want))
}

func TestAnObjectLargerThanEtcdTakesIsRefused(t *testing.T) {
	g := NewWithT(t)
	s := New(Options{})
	_, err := s.Create(configMaps, configMap("big", strings.Repeat("x", MaxObjectBytes)))
	g.Expect(apierrors.IsRequestEntityTooLargeError(err)).To(BeTrue(), "got %v", err)
	g.Expect(err.Error()).To(ContainSubstring("request is too large"))

	small := create(g, s, configMaps, configMap("small", "x"))
	small.Object["data"] = map[string]any{"v": strings.Repeat("x", MaxObjectBytes)}
	_, err = s.Update(configMaps, small)
	g.Expect(apierrors.IsRequestEntityTooLargeError(err)).To(BeTrue(), "got %v", err)

	// One that fits only without its managedFields is stored without them,
	// as kube-apiserver retries such a write.
	fits := configMap("fits", strings.Repeat("x", MaxObjectBytes-1000))
	fits.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "m", Operation: metav1.ManagedFieldsOperationUpdate,
		FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:data":{"f:v":{}},"f:x":"` + strings.Repeat("y", 2000) + `"}`)}}})
	out, err := s.Create(configMaps, fits)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.GetManagedFields()).To(BeEmpty())
}

func TestTheObjectCountIsBounded(t *testing.T) {
	g := NewWithT(t)
	s := New(Options{Limits: Limits{MaxObjects: len(DefaultNamespaces) + 2}})
	create(g, s, configMaps, configMap("a", "1"))
	create(g, s, configMaps, configMap("b", "1"))
	_, err := s.Create(configMaps, configMap("c", "1"))
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "got %v", err)
	g.Expect(err.Error()).To(ContainSubstring("exceeded quota: " + QuotaObjects + ", requested: objects=1, used: objects=6, limited: objects=6"))
	_, err = s.Create(configMaps, configMap("c", "1"), DryRun())
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "a dry run is refused as the write would be; got %v", err)

	// Updates and deletions are not creations.
	a := exists(g, s, configMaps, "default", "a")
	a.Object["data"] = map[string]any{"v": "2"}
	_, err = s.Update(configMaps, a)
	g.Expect(err).NotTo(HaveOccurred())
	_, _, err = s.Delete(configMaps, "default", "a", Preconditions{})
	g.Expect(err).NotTo(HaveOccurred())
	create(g, s, configMaps, configMap("c", "1"))
	g.Expect(s.Usage().Objects).To(Equal(6))
}

func TestTheBytesOfAClusterAreBounded(t *testing.T) {
	g := NewWithT(t)
	s := New(Options{})
	base := s.Usage().Bytes
	s = New(Options{Limits: Limits{MaxBytes: base + 3000}})
	a := create(g, s, configMaps, configMap("a", strings.Repeat("x", 1000)))
	create(g, s, configMaps, configMap("b", strings.Repeat("x", 1000)))
	_, err := s.Create(configMaps, configMap("c", strings.Repeat("x", 1000)))
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "got %v", err)
	g.Expect(err.Error()).To(ContainSubstring("exceeded quota: " + QuotaBytes + ", requested: bytes="))

	// Growing is refused, shrinking is not; deleting always works.
	a.Object["data"] = map[string]any{"v": strings.Repeat("x", 2000)}
	_, err = s.Update(configMaps, a)
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "got %v", err)
	a.Object["data"] = map[string]any{"v": "x"}
	a, err = s.Update(configMaps, a)
	g.Expect(err).NotTo(HaveOccurred())
	_, _, err = s.Delete(configMaps, "default", "b", Preconditions{})
	g.Expect(err).NotTo(HaveOccurred())
	create(g, s, configMaps, configMap("c", strings.Repeat("x", 1000)))

	// The count follows every change: it is what the objects take.
	var sum int64
	for _, res := range []Resource{Namespaces, configMaps} {
		items, _, err := s.List(res, "", ListOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		for _, i := range items {
			b, err := json.Marshal(i.Object)
			g.Expect(err).NotTo(HaveOccurred())
			sum += int64(len(b))
		}
	}
	g.Expect(s.Usage().Bytes).To(Equal(sum))
	g.Expect(New(Options{Restored: restoredFrom(g, s)}).Usage().Bytes).To(Equal(sum), "restored objects count too")
}

func restoredFrom(g Gomega, s *Store) []Restored {
	var out []Restored
	for _, res := range []Resource{Namespaces, configMaps} {
		items, _, err := s.List(res, "", ListOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		for _, i := range items {
			out = append(out, Restored{Resource: res, Object: i})
		}
	}
	return out
}

func TestOpenWatchesAreBounded(t *testing.T) {
	g := NewWithT(t)
	s := New(Options{Limits: Limits{MaxWatches: 2}})
	w1, err := s.Watch(pods, "", WatchOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	w2, err := s.Watch(nodes, "", WatchOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	defer w2.Stop()
	_, err = s.Watch(pods, "", WatchOptions{})
	g.Expect(apierrors.IsTooManyRequests(err)).To(BeTrue(), "got %v", err)
	secs, ok := apierrors.SuggestsClientDelay(err)
	g.Expect(ok).To(BeTrue())
	g.Expect(secs).To(Equal(1))

	w1.Stop()
	g.Eventually(func() error {
		w, err := s.Watch(pods, "", WatchOptions{})
		if err == nil {
			w.Stop()
		}
		return err
	}, gcTimeout).Should(Succeed())
}

func TestRequestsInFlightAreBounded(t *testing.T) {
	g := NewWithT(t)
	s := New(Options{Limits: Limits{MaxRequestsInFlight: 2}})
	done1, err := s.StartRequest()
	g.Expect(err).NotTo(HaveOccurred())
	done2, err := s.StartRequest()
	g.Expect(err).NotTo(HaveOccurred())
	_, err = s.StartRequest()
	g.Expect(apierrors.IsTooManyRequests(err)).To(BeTrue(), "got %v", err)
	g.Expect(s.Usage().RequestsInFlight).To(Equal(2))

	// Another cluster is not concerned.
	other := New(Options{Limits: Limits{MaxRequestsInFlight: 2}})
	doneOther, err := other.StartRequest()
	g.Expect(err).NotTo(HaveOccurred())
	doneOther()

	done1()
	done3, err := s.StartRequest()
	g.Expect(err).NotTo(HaveOccurred())
	done2()
	done3()
	g.Expect(s.Usage().RequestsInFlight).To(BeZero())
}
