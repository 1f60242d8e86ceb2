package apiserver

import (
	"context"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
)

const gcTimeout = 10 * time.Second

// family is a Deployment owning a middle object owning two Pods, as the
// Deployment and ReplicaSet controllers make them; the middle one is a
// ConfigMap, since the collector does not care about kinds.
type family struct {
	deployment *appsv1.Deployment
	replicaSet *corev1.ConfigMap
	pods       []*corev1.Pod
}

func controllerRef(apiVersion, kind, name string, uid metav1.Object) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid.GetUID(),
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
}

func makeFamily(t *testing.T, cs kubernetes.Interface, ns, name string) family {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	labels := map[string]string{"app": name}
	template := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}},
	}
	d, err := cs.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: template},
	}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	rs, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-1", OwnerReferences: []metav1.OwnerReference{controllerRef("apps/v1", "Deployment", name, d)}},
	}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	f := family{deployment: d, replicaSet: rs}
	for _, suffix := range []string{"a", "b"} {
		p, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: rs.Name + "-" + suffix, Labels: labels,
				OwnerReferences: []metav1.OwnerReference{controllerRef("v1", "ConfigMap", rs.Name, rs)}},
			Spec: template.Spec,
		}, metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		f.pods = append(f.pods, p)
	}
	return f
}

func (f family) gone(g Gomega, cs kubernetes.Interface) {
	ctx := context.Background()
	ns := f.deployment.Namespace
	g.EventuallyWithOffset(1, func() error {
		_, err := cs.AppsV1().Deployments(ns).Get(ctx, f.deployment.Name, metav1.GetOptions{})
		return err
	}, gcTimeout).Should(Satisfy(apierrors.IsNotFound))
	g.EventuallyWithOffset(1, func() error {
		_, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, f.replicaSet.Name, metav1.GetOptions{})
		return err
	}, gcTimeout).Should(Satisfy(apierrors.IsNotFound))
	g.EventuallyWithOffset(1, func() ([]corev1.Pod, error) {
		l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + f.deployment.Name})
		if err != nil {
			return nil, err
		}
		return l.Items, nil
	}, gcTimeout).Should(BeEmpty())
}

func TestDeletePropagationPoliciesThroughClientGo(t *testing.T) {
	ts := startServer(t, store.Options{}, "c1")
	cs := clientset(t, ts, "c1")
	ctx := context.Background()

	t.Run("background", func(t *testing.T) {
		g := NewWithT(t)
		f := makeFamily(t, cs, "default", "bg")
		g.Expect(cs.AppsV1().Deployments("default").Delete(ctx, "bg", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})).To(Succeed())
		f.gone(g, cs)
	})

	t.Run("default is background", func(t *testing.T) {
		g := NewWithT(t)
		f := makeFamily(t, cs, "default", "plain")
		g.Expect(cs.AppsV1().Deployments("default").Delete(ctx, "plain", metav1.DeleteOptions{})).To(Succeed())
		_, err := cs.AppsV1().Deployments("default").Get(ctx, "plain", metav1.GetOptions{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the owner goes at once; got %v", err)
		f.gone(g, cs)
	})

	t.Run("foreground", func(t *testing.T) {
		g := NewWithT(t)
		f := makeFamily(t, cs, "default", "fg")
		// A finalizer on a Pod holds the whole chain: the ReplicaSet waits
		// for its Pod, the Deployment for its ReplicaSet.
		held := f.pods[0].DeepCopy()
		held.Finalizers = []string{"example.com/hold"}
		_, err := cs.CoreV1().Pods("default").Update(ctx, held, metav1.UpdateOptions{})
		g.Expect(err).NotTo(HaveOccurred())

		w, err := cs.AppsV1().Deployments("default").Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=fg"})
		g.Expect(err).NotTo(HaveOccurred())
		defer w.Stop()
		g.Expect(cs.AppsV1().Deployments("default").Delete(ctx, "fg", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)})).To(Succeed())
		d, err := cs.AppsV1().Deployments("default").Get(ctx, "fg", metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(d.DeletionTimestamp).NotTo(BeNil())
		g.Expect(d.Finalizers).To(ConsistOf(metav1.FinalizerDeleteDependents))

		g.Eventually(func() error {
			_, err := cs.CoreV1().Pods("default").Get(ctx, f.pods[1].Name, metav1.GetOptions{})
			return err
		}, gcTimeout).Should(Satisfy(apierrors.IsNotFound))
		rs, err := cs.CoreV1().ConfigMaps("default").Get(ctx, f.replicaSet.Name, metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred(), "the held Pod keeps its ReplicaSet")
		g.Expect(rs.Finalizers).To(ConsistOf(metav1.FinalizerDeleteDependents))
		_, err = cs.AppsV1().Deployments("default").Get(ctx, "fg", metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred(), "and the ReplicaSet its Deployment")

		_, err = cs.CoreV1().Pods("default").Patch(ctx, held.Name, "application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		f.gone(g, cs)
	})

	t.Run("orphan", func(t *testing.T) {
		g := NewWithT(t)
		f := makeFamily(t, cs, "default", "orphan")
		g.Expect(cs.AppsV1().Deployments("default").Delete(ctx, "orphan", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationOrphan)})).To(Succeed())
		g.Eventually(func() error {
			_, err := cs.AppsV1().Deployments("default").Get(ctx, "orphan", metav1.GetOptions{})
			return err
		}, gcTimeout).Should(Satisfy(apierrors.IsNotFound))
		rs, err := cs.CoreV1().ConfigMaps("default").Get(ctx, f.replicaSet.Name, metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(rs.OwnerReferences).To(BeEmpty())
		// The ReplicaSet still owns its Pods.
		p, err := cs.CoreV1().Pods("default").Get(ctx, f.pods[0].Name, metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(p.OwnerReferences).To(HaveLen(1))
	})

	t.Run("legacy orphanDependents", func(t *testing.T) {
		g := NewWithT(t)
		f := makeFamily(t, cs, "default", "legacy")
		//nolint:staticcheck // SA1019: the legacy option is what is tested.
		g.Expect(cs.CoreV1().ConfigMaps("default").Delete(ctx, f.replicaSet.Name, metav1.DeleteOptions{OrphanDependents: ptr.To(true)})).To(Succeed())
		g.Eventually(func() error {
			_, err := cs.CoreV1().ConfigMaps("default").Get(ctx, f.replicaSet.Name, metav1.GetOptions{})
			return err
		}, gcTimeout).Should(Satisfy(apierrors.IsNotFound))
		p, err := cs.CoreV1().Pods("default").Get(ctx, f.pods[0].Name, metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(p.OwnerReferences).To(BeEmpty())

		// orphanDependents=false is background, and an object left in
		// place (a finalizer) is 202 Accepted, as kube-apiserver answers.
		held := f.deployment.DeepCopy()
		held.Finalizers = []string{"example.com/hold"}
		held.ResourceVersion = ""
		_, err = cs.AppsV1().Deployments("default").Update(ctx, held, metav1.UpdateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		var code int
		res := cs.AppsV1().RESTClient().Delete().Namespace("default").Resource("deployments").Name("legacy").
			Body(&metav1.DeleteOptions{OrphanDependents: ptr.To(false)}).Do(ctx) //nolint:staticcheck // SA1019: as above.
		g.Expect(res.StatusCode(&code).Error()).NotTo(HaveOccurred())
		g.Expect(code).To(Equal(http.StatusAccepted))
	})

	t.Run("query parameter and collection", func(t *testing.T) {
		g := NewWithT(t)
		f := makeFamily(t, cs, "default", "query")
		// propagationPolicy in the query, without a body.
		err := cs.CoreV1().RESTClient().Delete().Namespace("default").Resource("configmaps").Name(f.replicaSet.Name).
			Param("propagationPolicy", "Orphan").Do(ctx).Error()
		g.Expect(err).NotTo(HaveOccurred())
		g.Eventually(func() error {
			_, err := cs.CoreV1().ConfigMaps("default").Get(ctx, f.replicaSet.Name, metav1.GetOptions{})
			return err
		}, gcTimeout).Should(Satisfy(apierrors.IsNotFound))
		p, err := cs.CoreV1().Pods("default").Get(ctx, f.pods[0].Name, metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(p.OwnerReferences).To(BeEmpty())

		// A collection delete in the foreground.
		f2 := makeFamily(t, cs, "default", "coll")
		g.Expect(cs.AppsV1().Deployments("default").DeleteCollection(ctx,
			metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)},
			metav1.ListOptions{LabelSelector: ""})).To(Succeed())
		f2.gone(g, cs)
	})

	t.Run("bad options", func(t *testing.T) {
		g := NewWithT(t)
		_ = makeFamily(t, cs, "default", "bad")
		err := cs.AppsV1().Deployments("default").Delete(ctx, "bad", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletionPropagation("Sideways"))})
		g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
		g.Expect(err.Error()).To(ContainSubstring(`propagationPolicy: Unsupported value: "Sideways"`))
		//nolint:staticcheck // SA1019: the legacy option is what is tested.
		err = cs.AppsV1().Deployments("default").Delete(ctx, "bad", metav1.DeleteOptions{OrphanDependents: ptr.To(true), PropagationPolicy: ptr.To(metav1.DeletePropagationOrphan)})
		g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
		_, err = cs.AppsV1().Deployments("default").Get(ctx, "bad", metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred(), "nothing was deleted")
	})

	t.Run("dangling owner", func(t *testing.T) {
		g := NewWithT(t)
		_, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "orphaned",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Secret", Name: "never", UID: "0e3a4b52-0000-0000-0000-000000000000"}}}},
			metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Eventually(func() error {
			_, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "orphaned", metav1.GetOptions{})
			return err
		}, gcTimeout).Should(Satisfy(apierrors.IsNotFound))

		_, err = cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "no-uid",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Secret", Name: "never"}}}},
			metav1.CreateOptions{})
		g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
	})
}

func TestNamespaceDeletionCollectsEverythingInIt(t *testing.T) {
	g := NewWithT(t)
	ts := startServer(t, store.Options{}, "c1")
	cs := clientset(t, ts, "c1")
	ctx := context.Background()
	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "app"}}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	f := makeFamily(t, cs, "app", "web")
	g.Expect(cs.CoreV1().Namespaces().Delete(ctx, "app", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)})).To(Succeed())
	f.gone(g, cs)
	g.Eventually(func() error {
		_, err := cs.CoreV1().Namespaces().Get(ctx, "app", metav1.GetOptions{})
		return err
	}, gcTimeout).Should(Satisfy(apierrors.IsNotFound))
}

func TestKubectlDeleteCascades(t *testing.T) {
	ts := startServer(t, store.Options{}, "c1")
	cs := clientset(t, ts, "c1")
	_, kubectl := kubectlFor(t, ts, "c1")
	ctx := context.Background()
	for _, cascade := range []string{"foreground", "background", "orphan"} {
		t.Run(cascade, func(t *testing.T) {
			g := NewWithT(t)
			f := makeFamily(t, cs, "default", cascade)
			// kubectl waits for the Deployment to be gone (--wait defaults to true).
			out, err := kubectl("delete", "deployment", cascade, "--cascade="+cascade)
			g.Expect(err).NotTo(HaveOccurred(), out)
			g.Expect(out).To(ContainSubstring(`deployment.apps "` + cascade + `" deleted`))
			_, err = cs.AppsV1().Deployments("default").Get(ctx, cascade, metav1.GetOptions{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "got %v", err)
			if cascade != "orphan" {
				f.gone(g, cs)
				return
			}
			middle, err := cs.CoreV1().ConfigMaps("default").Get(ctx, f.replicaSet.Name, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(middle.OwnerReferences).To(BeEmpty())
			pods, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=" + cascade})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(pods.Items).To(HaveLen(2))
		})
	}
}
