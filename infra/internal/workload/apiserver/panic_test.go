package apiserver

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
)

func TestAPanicIsAnswered500WithAStatus(t *testing.T) {
	g := NewWithT(t)
	h, err := New(Options{StoreFor: func(*http.Request) (*store.Store, error) { panic("resolver bug") }})
	g.Expect(err).NotTo(HaveOccurred())
	srv := httptest.NewServer(h)
	defer srv.Close()

	resp, err := http.Get(srv.URL + "/api/v1/nodes")
	g.Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusInternalServerError))
	st := &metav1.Status{}
	g.Expect(json.NewDecoder(resp.Body).Decode(st)).To(Succeed())
	g.Expect(st.Kind).To(Equal("Status"))
	g.Expect(st.Reason).To(Equal(metav1.StatusReasonInternalError))
	g.Expect(st.Message).To(ContainSubstring("resolver bug"))

	_, err = New(Options{})
	g.Expect(err).To(HaveOccurred(), "StoreFor is required")
}
