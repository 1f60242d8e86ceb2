package apiserver

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
)

// A Deployment and a Pod created with only what they need read back with
// the defaults envtest's kube-apiserver v1.36.3 gives them.
func TestBuiltinDefaultsAreKubeAPIServers(t *testing.T) {
	g := NewWithT(t)
	managementOpenAPI(t) // starts the envtest kube-apiserver
	real, err := kubernetes.NewForConfig(management.env.Config)
	g.Expect(err).NotTo(HaveOccurred())
	ts := startServer(t, store.Options{}, "c1")
	ours := clientset(t, ts, "c1")
	ctx := context.Background()
	spec := corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "init", Image: "busybox:latest"}},
		Containers:     []corev1.Container{{Name: "a", Image: "nginx"}, {Name: "b", Image: "registry.k8s.io/pause:3.10"}},
	}
	create := func(cs kubernetes.Interface) (*appsv1.Deployment, *corev1.Pod) {
		d, err := cs.AppsV1().Deployments("default").Create(ctx, &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "defaults"},
			Spec: appsv1.DeploymentSpec{
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "d"}},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "d"}}, Spec: spec},
			},
		}, metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		p, err := cs.CoreV1().Pods("default").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "defaults"}, Spec: spec}, metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		return d, p
	}
	wantD, wantP := create(real)
	gotD, gotP := create(ours)
	g.Expect(gotD.Spec.Replicas).To(Equal(wantD.Spec.Replicas))
	g.Expect(gotD.Spec.Strategy).To(Equal(wantD.Spec.Strategy))
	g.Expect(gotD.Spec.RevisionHistoryLimit).To(Equal(wantD.Spec.RevisionHistoryLimit))
	g.Expect(gotD.Spec.ProgressDeadlineSeconds).To(Equal(wantD.Spec.ProgressDeadlineSeconds))
	for _, pair := range [][2]corev1.PodSpec{{gotD.Spec.Template.Spec, wantD.Spec.Template.Spec}, {gotP.Spec, wantP.Spec}} {
		got, want := pair[0], pair[1]
		g.Expect(got.RestartPolicy).To(Equal(want.RestartPolicy))
		g.Expect(got.DNSPolicy).To(Equal(want.DNSPolicy))
		g.Expect(got.SchedulerName).To(Equal(want.SchedulerName))
		g.Expect(got.TerminationGracePeriodSeconds).To(Equal(want.TerminationGracePeriodSeconds))
		g.Expect(got.SecurityContext).To(Equal(want.SecurityContext))
		for i, c := range append(got.InitContainers, got.Containers...) {
			w := append(want.InitContainers, want.Containers...)[i]
			g.Expect(c.TerminationMessagePath).To(Equal(w.TerminationMessagePath), c.Name)
			g.Expect(c.TerminationMessagePolicy).To(Equal(w.TerminationMessagePolicy), c.Name)
			g.Expect(c.ImagePullPolicy).To(Equal(w.ImagePullPolicy), c.Name)
		}
	}
	g.Expect(real.AppsV1().Deployments("default").Delete(ctx, "defaults", metav1.DeleteOptions{})).To(Succeed())
	g.Expect(real.CoreV1().Pods("default").Delete(ctx, "defaults", metav1.DeleteOptions{})).To(Succeed())
}
