package store

import (
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/watch"
)

// A Stream delivers on the caller's goroutine what a Watch delivers: the
// changes in order, from the resourceVersion asked for; it ends when
// deliver fails, and a Stream stopped before Run leaves no watch behind.
func TestAStreamDeliversOnTheCallersGoroutine(t *testing.T) {
	g := NewWithT(t)
	s := New(Options{})
	rv := s.ResourceVersion()
	for _, name := range []string{"a", "b", "c"} {
		_, err := s.Create(pods, pod("default", name, "n", nil))
		g.Expect(err).NotTo(HaveOccurred())
	}
	st, err := s.OpenStream(pods, "default", WatchOptions{ResourceVersion: rv})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.Usage().Watches).To(Equal(1))
	var got []string
	enough := errors.New("enough")
	st.Run(context.Background(), func(e watch.Event) error {
		g.Expect(e.Type).To(Equal(watch.Added))
		got = append(got, e.Object.(interface{ GetName() string }).GetName())
		if len(got) == 3 {
			return enough
		}
		return nil
	})
	g.Expect(got).To(Equal([]string{"a", "b", "c"}))
	g.Expect(s.Usage().Watches).To(BeZero(), "a Run that ended unregisters its watch")

	st, err = s.OpenStream(pods, "", WatchOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	st.Stop()
	g.Expect(s.Usage().Watches).To(BeZero())
	delivered := 0
	st.Run(context.Background(), func(watch.Event) error { delivered++; return nil })
	g.Expect(delivered).To(BeZero(), "a stopped Stream's Run returns at once")

	_, err = s.OpenStream(pods, "", WatchOptions{ResourceVersion: "1"})
	g.Expect(apierrors.IsResourceExpired(err)).To(BeTrue(), "a version older than the history is 410, as for Watch: %v", err)
}
