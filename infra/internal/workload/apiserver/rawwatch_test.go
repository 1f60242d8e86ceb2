package apiserver

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
)

// rawWatch opens a watch over plain HTTP/1.1 and decodes its lines.
func rawWatch(g Gomega, url string) (*http.Response, *bufio.Scanner) {
	resp, err := http.Get(url)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
	g.Expect(resp.Header.Get("Content-Type")).To(Equal("application/json"))
	return resp, bufio.NewScanner(resp.Body)
}

type rawEvent struct {
	Type   string          `json:"type"`
	Object json.RawMessage `json:"object"`
}

func nextRaw(g Gomega, sc *bufio.Scanner) rawEvent {
	g.Expect(sc.Scan()).To(BeTrue(), "an event line")
	var e rawEvent
	g.Expect(json.Unmarshal(sc.Bytes(), &e)).To(Succeed())
	return e
}

func TestWatchStreamsOverHTTP1AndAnswersExpiredVersionsWithAnErrorEvent(t *testing.T) {
	g := NewWithT(t)
	s := store.New(store.Options{})
	h, err := New(Options{StoreFor: func(*http.Request) (*store.Store, error) { return s, nil }})
	g.Expect(err).NotTo(HaveOccurred())
	srv := httptest.NewServer(h)
	defer srv.Close()

	// The current state as ADDED events.
	resp, sc := rawWatch(g, srv.URL+"/api/v1/namespaces?watch=true&resourceVersion=0&timeoutSeconds=5")
	for range 4 {
		e := nextRaw(g, sc)
		g.Expect(e.Type).To(Equal("ADDED"))
		ns := &metav1.PartialObjectMetadata{}
		g.Expect(json.Unmarshal(e.Object, ns)).To(Succeed())
		g.Expect(ns.Kind).To(Equal("Namespace"))
	}
	resp.Body.Close()

	// A version older than the store: 200, then one ERROR event with the
	// 410 Expired Status, then the end of the stream.
	resp, sc = rawWatch(g, srv.URL+"/api/v1/namespaces?watch=1&resourceVersion=1")
	defer resp.Body.Close()
	e := nextRaw(g, sc)
	g.Expect(e.Type).To(Equal("ERROR"))
	st := &metav1.Status{}
	g.Expect(json.Unmarshal(e.Object, st)).To(Succeed())
	g.Expect(st.Kind).To(Equal("Status"))
	g.Expect(st.Code).To(Equal(int32(http.StatusGone)))
	g.Expect(st.Reason).To(Equal(metav1.StatusReasonExpired))
	g.Expect(sc.Scan()).To(BeFalse())
}
