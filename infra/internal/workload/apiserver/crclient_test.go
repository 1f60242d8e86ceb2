package apiserver

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
)

func crClient(t *testing.T, ts *testServer) client.Client {
	t.Helper()
	c, err := client.New(ts.restConfig(t, "c1"), client.Options{Scheme: clientgoscheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestControllerRuntimeClientGetsAndListsWithLabelSelectors(t *testing.T) {
	g := NewWithT(t)
	ts := startServer(t, store.Options{}, "c1")
	c := crClient(t, ts)
	ctx := context.Background()
	for _, n := range []struct{ name, role string }{{"cp-0", "control-plane"}, {"w-0", "worker"}, {"w-1", "worker"}} {
		g.Expect(c.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name, Labels: map[string]string{"role": n.role}}})).To(Succeed())
	}
	workers := &corev1.NodeList{}
	g.Expect(c.List(ctx, workers, client.MatchingLabels{"role": "worker"})).To(Succeed())
	g.Expect(workers.Items).To(HaveLen(2))
	g.Expect(workers.ResourceVersion).NotTo(BeEmpty())

	n := &corev1.Node{}
	g.Expect(c.Get(ctx, client.ObjectKey{Name: "cp-0"}, n)).To(Succeed())
	g.Expect(n.Labels).To(HaveKeyWithValue("role", "control-plane"))
	err := c.Get(ctx, client.ObjectKey{Name: "absent"}, n)
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "got %v", err)

	// Metadata-only lists (PartialObjectMetadata) are served as JSON, which
	// the client reads as metadata.
	meta := &metav1.PartialObjectMetadataList{}
	meta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NodeList"))
	g.Expect(c.List(ctx, meta, client.MatchingLabels{"role": "control-plane"})).To(Succeed())
	g.Expect(meta.Items).To(HaveLen(1))
	g.Expect(meta.Items[0].Name).To(Equal("cp-0"))
}

func TestControllerRuntimeClientAppliesLabelsOntoANode(t *testing.T) {
	g := NewWithT(t)
	ts := startServer(t, store.Options{}, "c1")
	c := crClient(t, ts)
	ctx := context.Background()
	g.Expect(c.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"kept": "yes"}}})).To(Succeed())

	// As Cluster API's machine controller syncs labels onto Nodes.
	g.Expect(c.Apply(ctx, corev1ac.Node("n").WithLabels(map[string]string{"node-role.kubernetes.io/worker": "", "topology": "a"}),
		client.FieldOwner("capi-machine"), client.ForceOwnership)).To(Succeed())
	n := &corev1.Node{}
	g.Expect(c.Get(ctx, client.ObjectKey{Name: "n"}, n)).To(Succeed())
	g.Expect(n.Labels).To(Equal(map[string]string{"kept": "yes", "node-role.kubernetes.io/worker": "", "topology": "a"}))
	managers := map[string]metav1.ManagedFieldsOperationType{}
	for _, mf := range n.ManagedFields {
		managers[mf.Manager] = mf.Operation
	}
	g.Expect(managers).To(HaveKeyWithValue("capi-machine", metav1.ManagedFieldsOperationApply))

	// Applying again without a label gives it up; another manager's value conflicts unless forced.
	g.Expect(c.Apply(ctx, corev1ac.Node("n").WithLabels(map[string]string{"topology": "a"}),
		client.FieldOwner("capi-machine"), client.ForceOwnership)).To(Succeed())
	g.Expect(c.Get(ctx, client.ObjectKey{Name: "n"}, n)).To(Succeed())
	g.Expect(n.Labels).NotTo(HaveKey("node-role.kubernetes.io/worker"))
	err := c.Apply(ctx, corev1ac.Node("n").WithLabels(map[string]string{"topology": "b"}), client.FieldOwner("someone-else"))
	g.Expect(apierrors.IsConflict(err)).To(BeTrue(), "got %v", err)
	g.Expect(c.Apply(ctx, corev1ac.Node("n").WithLabels(map[string]string{"topology": "b"}), client.FieldOwner("someone-else"), client.ForceOwnership)).To(Succeed())

	// Apply creates what does not exist, and needs a field manager.
	g.Expect(c.Apply(ctx, corev1ac.ConfigMap("applied", "default").WithData(map[string]string{"a": "b"}), client.FieldOwner("test"))).To(Succeed())
	cm := &corev1.ConfigMap{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "applied"}, cm)).To(Succeed())
	g.Expect(cm.Data).To(Equal(map[string]string{"a": "b"}))
	err = c.Apply(ctx, corev1ac.ConfigMap("applied", "default").WithData(map[string]string{"a": "c"}))
	g.Expect(apierrors.IsBadRequest(err)).To(BeTrue(), "got %v", err)
}

func TestControllerRuntimeClientPatchesAndConflicts(t *testing.T) {
	g := NewWithT(t)
	ts := startServer(t, store.Options{}, "c1")
	c := crClient(t, ts)
	ctx := context.Background()
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "coredns", Namespace: "kube-system"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"k8s-app": "kube-dns"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"k8s-app": "kube-dns"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{
					{Name: "coredns", Image: "coredns:v1.11.1"},
					{Name: "sidecar", Image: "sidecar:v1"},
				}},
			},
		},
	}
	g.Expect(c.Create(ctx, d)).To(Succeed())
	g.Expect(d.Generation).To(Equal(int64(1)))
	stale := d.DeepCopy()

	// Strategic merge: the containers list merges by name, as kubeadm's
	// CoreDNS upgrade patches the image.
	orig := d.DeepCopy()
	d.Spec.Template.Spec.Containers = []corev1.Container{{Name: "coredns", Image: "coredns:v1.12.0"}, {Name: "sidecar", Image: "sidecar:v1"}}
	g.Expect(c.Patch(ctx, d, client.StrategicMergeFrom(orig))).To(Succeed())
	g.Expect(d.Spec.Template.Spec.Containers).To(HaveLen(2))
	g.Expect(d.Spec.Template.Spec.Containers[0].Image).To(Equal("coredns:v1.12.0"))
	g.Expect(d.Generation).To(Equal(int64(2)), "a spec change bumps the generation")

	// JSON merge patch of the status subresource.
	orig = d.DeepCopy()
	d.Status.ReadyReplicas = 2
	g.Expect(c.Status().Patch(ctx, d, client.MergeFrom(orig))).To(Succeed())
	g.Expect(d.Status.ReadyReplicas).To(Equal(int32(2)))
	g.Expect(d.Generation).To(Equal(int64(2)), "a status change does not")

	// A merge patch with an optimistic lock conflicts once the object moved on.
	g.Expect(c.Patch(ctx, stale.DeepCopy(), client.MergeFromWithOptions(stale.DeepCopy(), client.MergeFromWithOptimisticLock{}))).
		To(Satisfy(apierrors.IsConflict))

	// An update from a stale copy conflicts.
	stale.Spec.Replicas = ptr.To[int32](5)
	err := c.Update(ctx, stale)
	g.Expect(apierrors.IsConflict(err)).To(BeTrue(), "got %v", err)

	got := &appsv1.Deployment{}
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(d), got)).To(Succeed())
	g.Expect(*got.Spec.Replicas).To(Equal(int32(2)))
	g.Expect(got.Status.ReadyReplicas).To(Equal(int32(2)))
}

// Cluster API's machine deletion pages through VolumeAttachments while it
// waits for a drained node's volumes to detach: the list is served (and
// empty until someone creates one), so deletion goes on.
func TestVolumeAttachmentsArePagedAsClusterAPIListsThem(t *testing.T) {
	g := NewWithT(t)
	ts := startServer(t, store.Options{}, "c1")
	c := crClient(t, ts)
	ctx := context.Background()
	list := &storagev1.VolumeAttachmentList{}
	g.Expect(c.List(ctx, list, client.Limit(100))).To(Succeed())
	g.Expect(list.Items).To(BeEmpty())
	g.Expect(list.Continue).To(BeEmpty())

	source := "pv-0"
	g.Expect(c.Create(ctx, &storagev1.VolumeAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: "va-0"},
		Spec:       storagev1.VolumeAttachmentSpec{Attacher: "csi.example.com", NodeName: "w-0", Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: &source}},
	})).To(Succeed())
	g.Expect(c.List(ctx, list, client.Limit(100))).To(Succeed())
	g.Expect(list.Items).To(HaveLen(1))
	g.Expect(list.Items[0].Spec.NodeName).To(Equal("w-0"))
}
