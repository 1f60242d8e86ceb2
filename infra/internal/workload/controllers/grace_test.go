package controllers

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
)

// A Pod bound to a Node is deleted as kube-apiserver deletes it: marked
// Terminating with its grace period (the Pod's, or the request's), then
// ended by its kubelet (containers terminated, deleted with grace 0); an
// unbound Pod, or a deletion with gracePeriodSeconds=0, goes at once; and
// kubectl delete waits for it as against a real cluster.
func TestDeletedPodsTerminateThroughTheirKubelet(t *testing.T) {
	e := newEnv(t, Options{})
	e.node("cp", true, nil, nil)
	e.workers("w1")
	cs, kubectl := e.serve()
	ctx := context.Background()
	pod := func(name string, nodeSelector map[string]string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{
				TerminationGracePeriodSeconds: ptr.To[int64](45), NodeSelector: nodeSelector,
				Containers: []corev1.Container{{Name: "main", Image: "nginx"}},
			},
		}
	}
	running := func(name string) func() bool {
		return func() bool {
			p, err := cs.CoreV1().Pods(testNS).Get(ctx, name, metav1.GetOptions{})
			return err == nil && runningReady(p)
		}
	}
	for _, name := range []string{"graceful", "now", "kubectl"} {
		_, err := cs.CoreV1().Pods(testNS).Create(ctx, pod(name, nil), metav1.CreateOptions{})
		e.g.Expect(err).NotTo(HaveOccurred())
		e.g.Eventually(running(name), 30*time.Second).Should(BeTrue())
	}

	w, err := cs.CoreV1().Pods(testNS).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=graceful"})
	e.g.Expect(err).NotTo(HaveOccurred())
	defer w.Stop()
	var added watch.Event
	e.g.Eventually(w.ResultChan(), 10*time.Second).Should(Receive(&added))
	e.g.Expect(cs.CoreV1().Pods(testNS).Delete(ctx, "graceful", metav1.DeleteOptions{})).To(Succeed())
	var terminating, last *corev1.Pod
	e.g.Eventually(func() watch.EventType {
		select {
		case ev := <-w.ResultChan():
			p := ev.Object.(*corev1.Pod)
			if terminating == nil && p.DeletionTimestamp != nil {
				terminating = p
			}
			last = p
			return ev.Type
		default:
			return ""
		}
	}, 30*time.Second).Should(Equal(watch.Deleted))
	e.g.Expect(terminating).NotTo(BeNil())
	e.g.Expect(terminating.DeletionGracePeriodSeconds).To(Equal(ptr.To[int64](45)))
	e.g.Expect(terminating.DeletionTimestamp.Time).To(BeTemporally(">", time.Now().Add(30*time.Second)))
	e.g.Expect(last.Status.Phase).To(Equal(corev1.PodSucceeded))
	e.g.Expect(last.Status.ContainerStatuses[0].State.Terminated).NotTo(BeNil())
	e.g.Expect(*last.DeletionGracePeriodSeconds).To(BeZero())

	deleted, err := cs.CoreV1().Pods(testNS).Get(ctx, "now", metav1.GetOptions{})
	e.g.Expect(err).NotTo(HaveOccurred())
	e.g.Expect(cs.CoreV1().Pods(testNS).Delete(ctx, "now", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})).To(Succeed())
	_, err = cs.CoreV1().Pods(testNS).Get(ctx, "now", metav1.GetOptions{})
	e.g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "got %v after deleting %s", err, deleted.Name)

	_, err = cs.CoreV1().Pods(testNS).Create(ctx, pod("unbound", map[string]string{"no-such": "node"}), metav1.CreateOptions{})
	e.g.Expect(err).NotTo(HaveOccurred())
	e.g.Expect(cs.CoreV1().Pods(testNS).Delete(ctx, "unbound", metav1.DeleteOptions{})).To(Succeed())
	_, err = cs.CoreV1().Pods(testNS).Get(ctx, "unbound", metav1.GetOptions{})
	e.g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "got %v", err)

	out, err := kubectl("delete", "pod", "kubectl", "--timeout=60s")
	e.g.Expect(err).NotTo(HaveOccurred(), out)
	e.g.Expect(out).To(ContainSubstring(`pod "kubectl" deleted`))
	_, err = cs.CoreV1().Pods(testNS).Get(ctx, "kubectl", metav1.GetOptions{})
	e.g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "got %v", err)
}
