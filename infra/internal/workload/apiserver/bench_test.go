package apiserver

import (
	"context"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
)

// Benchmarks of the handler over TLS with client-go, one client at a time:
// figures for sizing, not assertions.

func benchCluster(b *testing.B, pods int) (*testServer, context.Context) {
	b.Helper()
	ts := startServer(b, store.Options{}, "c1")
	cs := clientset(b, ts, "c1")
	ctx := context.Background()
	if _, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	for i := range pods {
		_, err := cs.CoreV1().Pods("kube-system").Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "p" + strconv.Itoa(i), Labels: map[string]string{"i": strconv.Itoa(i % 10)}},
			Spec:       corev1.PodSpec{NodeName: "n", Containers: []corev1.Container{{Name: "c", Image: "i"}}},
		}, metav1.CreateOptions{})
		if err != nil {
			b.Fatal(err)
		}
	}
	return ts, ctx
}

func BenchmarkGetNode(b *testing.B) {
	ts, ctx := benchCluster(b, 0)
	cs := clientset(b, ts, "c1")
	for b.Loop() {
		if _, err := cs.CoreV1().Nodes().Get(ctx, "n", metav1.GetOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkListPodsByLabelOf100(b *testing.B) {
	ts, ctx := benchCluster(b, 100)
	cs := clientset(b, ts, "c1")
	for b.Loop() {
		l, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: "i=3"})
		if err != nil || len(l.Items) != 10 {
			b.Fatal(err, len(l.Items))
		}
	}
}

func BenchmarkStrategicMergePatchNodeLabel(b *testing.B) {
	ts, ctx := benchCluster(b, 0)
	cs := clientset(b, ts, "c1")
	i := 0
	for b.Loop() {
		i++
		patch := []byte(`{"metadata":{"labels":{"round":"` + strconv.Itoa(i) + `"}}}`)
		if _, err := cs.CoreV1().Nodes().Patch(ctx, "n", types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}
