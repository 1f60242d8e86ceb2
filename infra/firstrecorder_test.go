package infra

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
)

func TestTheFirstRecorderOfAnEndpointIsTheOldestMonolithClusterRecordingIt(t *testing.T) {
	g := NewWithT(t)
	ep := clusterv1.APIEndpoint{Host: "127.0.0.1", Port: 20001}
	at := func(ns, name string, created time.Time, e clusterv1.APIEndpoint) v1alpha1.MonolithCluster {
		return v1alpha1.MonolithCluster{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: metav1.NewTime(created)},
			Spec:       v1alpha1.MonolithClusterSpec{ControlPlaneEndpoint: e},
		}
	}
	t0 := time.Date(2026, 11, 28, 6, 0, 0, 0, time.UTC)
	items := []v1alpha1.MonolithCluster{
		at("b", "younger", t0.Add(time.Minute), ep),
		at("z", "oldest-elsewhere", t0.Add(-time.Hour), clusterv1.APIEndpoint{Host: "127.0.0.1", Port: 20002}),
		at("c", "same-second", t0, ep),
		at("a", "same-second", t0, ep),
	}
	first := firstRecorder(items, ep)
	g.Expect(first).NotTo(BeNil())
	g.Expect(first.Namespace+"/"+first.Name).To(Equal("a/same-second"), "the oldest, then by namespace and name")
	g.Expect(firstRecorder(items, clusterv1.APIEndpoint{Host: "127.0.0.1", Port: 20003})).To(BeNil())
}
