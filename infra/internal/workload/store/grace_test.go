package store

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// A graceful Delete marks the object until a Delete with a shorter period;
// 0 removes it, a longer period or none changes nothing.
func TestAGracefulDeleteWaitsForAShorterOne(t *testing.T) {
	g := NewWithT(t)
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	s := New(Options{Now: func() time.Time { return now }})
	pods := Resource{Resource: "pods", Namespaced: true}
	_, err := s.Create(pods, object("v1", "Pod", "default", "p"))
	g.Expect(err).NotTo(HaveOccurred())

	obj, gone, err := s.Delete(pods, "default", "p", Preconditions{}, GracePeriod(30))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(gone).To(BeFalse())
	g.Expect(*obj.GetDeletionGracePeriodSeconds()).To(Equal(int64(30)))
	g.Expect(obj.GetDeletionTimestamp().Time.Equal(now.Add(30 * time.Second))).To(BeTrue())

	for _, opts := range [][]WriteOption{{GracePeriod(60)}, nil} {
		obj, gone, err = s.Delete(pods, "default", "p", Preconditions{}, opts...)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(gone).To(BeFalse())
		g.Expect(*obj.GetDeletionGracePeriodSeconds()).To(Equal(int64(30)))
	}
	obj, gone, err = s.Delete(pods, "default", "p", Preconditions{}, GracePeriod(10))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(gone).To(BeFalse())
	g.Expect(*obj.GetDeletionGracePeriodSeconds()).To(Equal(int64(10)))

	_, gone, err = s.Delete(pods, "default", "p", Preconditions{}, GracePeriod(0), DryRun())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(gone).To(BeTrue())
	_, err = s.Get(pods, "default", "p")
	g.Expect(err).NotTo(HaveOccurred())
	_, gone, err = s.Delete(pods, "default", "p", Preconditions{}, GracePeriod(0))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(gone).To(BeTrue())
	_, err = s.Get(pods, "default", "p")
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
}
