package store

import (
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

var (
	deployments = Resource{Group: "apps", Resource: "deployments", Namespaced: true}
	replicaSets = Resource{Group: "apps", Resource: "replicasets", Namespaced: true}
	crBindings  = Resource{Group: "rbac.authorization.k8s.io", Resource: "clusterrolebindings"}
)

const gcTimeout = 5 * time.Second

func object(apiVersion, kind, ns, name string, owners ...metav1.OwnerReference) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind}}
	u.SetNamespace(ns)
	u.SetName(name)
	if len(owners) > 0 {
		u.SetOwnerReferences(owners)
	}
	return u
}

// ownedBy is an ownerReference to owner; block sets blockOwnerDeletion.
func ownedBy(owner *unstructured.Unstructured, block bool) metav1.OwnerReference {
	ref := metav1.OwnerReference{APIVersion: owner.GetAPIVersion(), Kind: owner.GetKind(), Name: owner.GetName(), UID: owner.GetUID()}
	if block {
		ref.BlockOwnerDeletion = ptr.To(true)
	}
	return ref
}

func create(g Gomega, s *Store, res Resource, obj *unstructured.Unstructured) *unstructured.Unstructured {
	out, err := s.Create(res, obj)
	g.ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return out
}

// gone polls until the object is not found.
func gone(g Gomega, s *Store, res Resource, ns, name string) {
	g.EventuallyWithOffset(1, func() bool {
		_, err := s.Get(res, ns, name)
		return apierrors.IsNotFound(err)
	}, gcTimeout).Should(BeTrue(), "%s %s/%s should be collected", res.Resource, ns, name)
}

// idle waits for the collector to have handled everything queued.
func idle(g Gomega, s *Store) {
	g.EventuallyWithOffset(1, s.CollectorIdle, gcTimeout).Should(BeTrue())
}

func exists(g Gomega, s *Store, res Resource, ns, name string) *unstructured.Unstructured {
	obj, err := s.Get(res, ns, name)
	g.ExpectWithOffset(1, err).NotTo(HaveOccurred(), "%s %s/%s should exist", res.Resource, ns, name)
	return obj
}

func TestBackgroundDeletionCollectsDependentsAfterTheOwner(t *testing.T) {
	g := NewWithT(t)
	s := New(Options{})
	d := create(g, s, deployments, object("apps/v1", "Deployment", "default", "web"))
	rs := create(g, s, replicaSets, object("apps/v1", "ReplicaSet", "default", "web-1", ownedBy(d, true)))
	create(g, s, pods, object("v1", "Pod", "default", "web-1-a", ownedBy(rs, true)))
	create(g, s, pods, object("v1", "Pod", "default", "web-1-b", ownedBy(rs, true)))
	create(g, s, pods, object("v1", "Pod", "default", "other"))

	// The default policy, and Background said, delete the owner at once.
	_, done, err := s.Delete(deployments, "default", "web", Preconditions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(done).To(BeTrue())
	gone(g, s, replicaSets, "default", "web-1")
	gone(g, s, pods, "default", "web-1-a")
	gone(g, s, pods, "default", "web-1-b")
	idle(g, s)
	exists(g, s, pods, "default", "other")

	rs2 := create(g, s, replicaSets, object("apps/v1", "ReplicaSet", "default", "solo"))
	create(g, s, pods, object("v1", "Pod", "default", "solo-a", ownedBy(rs2, false)))
	_, done, err = s.Delete(replicaSets, "default", "solo", Preconditions{}, Propagation(metav1.DeletePropagationBackground))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(done).To(BeTrue())
	gone(g, s, pods, "default", "solo-a")
}

func TestForegroundDeletionWaitsForBlockingDependents(t *testing.T) {
	g := NewWithT(t)
	s := New(Options{})
	d := create(g, s, deployments, object("apps/v1", "Deployment", "default", "web"))
	held := object("apps/v1", "ReplicaSet", "default", "held", ownedBy(d, true))
	held.SetFinalizers([]string{"example.com/hold"})
	create(g, s, replicaSets, held)
	rs := create(g, s, replicaSets, object("apps/v1", "ReplicaSet", "default", "web-1", ownedBy(d, true)))
	create(g, s, pods, object("v1", "Pod", "default", "web-1-a", ownedBy(rs, true)))

	out, done, err := s.Delete(deployments, "default", "web", Preconditions{}, Propagation(metav1.DeletePropagationForeground))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(done).To(BeFalse())
	g.Expect(out.GetDeletionTimestamp()).NotTo(BeNil())
	g.Expect(out.GetFinalizers()).To(ConsistOf(metav1.FinalizerDeleteDependents))

	// The dependents go first, theirs before them (in the foreground too).
	gone(g, s, pods, "default", "web-1-a")
	gone(g, s, replicaSets, "default", "web-1")
	idle(g, s)
	// The one a finalizer holds is being deleted, and keeps its owner.
	h := exists(g, s, replicaSets, "default", "held")
	g.Expect(h.GetDeletionTimestamp()).NotTo(BeNil())
	owner := exists(g, s, deployments, "default", "web")
	g.Expect(owner.GetFinalizers()).To(ConsistOf(metav1.FinalizerDeleteDependents))

	h.SetFinalizers(nil)
	_, err = s.Update(replicaSets, h)
	g.Expect(err).NotTo(HaveOccurred())
	gone(g, s, replicaSets, "default", "held")
	gone(g, s, deployments, "default", "web")
}

func TestForegroundDeletionDoesNotWaitForNonBlockingDependents(t *testing.T) {
	g := NewWithT(t)
	s := New(Options{})
	d := create(g, s, deployments, object("apps/v1", "Deployment", "default", "web"))
	held := object("apps/v1", "ReplicaSet", "default", "held", ownedBy(d, false))
	held.SetFinalizers([]string{"example.com/hold"})
	create(g, s, replicaSets, held)

	_, _, err := s.Delete(deployments, "default", "web", Preconditions{}, Propagation(metav1.DeletePropagationForeground))
	g.Expect(err).NotTo(HaveOccurred())
	gone(g, s, deployments, "default", "web")
	idle(g, s)
	h := exists(g, s, replicaSets, "default", "held")
	g.Expect(h.GetDeletionTimestamp()).NotTo(BeNil(), "the dependent is deleted too")

	// An owner with no dependents at all goes as soon as the collector sees it.
	create(g, s, deployments, object("apps/v1", "Deployment", "default", "lonely"))
	_, done, err := s.Delete(deployments, "default", "lonely", Preconditions{}, Propagation(metav1.DeletePropagationForeground))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(done).To(BeFalse())
	gone(g, s, deployments, "default", "lonely")
}

func TestOrphanDeletionLeavesDependentsWithoutTheirOwner(t *testing.T) {
	g := NewWithT(t)
	s := New(Options{})
	d := create(g, s, deployments, object("apps/v1", "Deployment", "default", "web"))
	other := create(g, s, deployments, object("apps/v1", "Deployment", "default", "other"))
	create(g, s, replicaSets, object("apps/v1", "ReplicaSet", "default", "a", ownedBy(d, true)))
	create(g, s, replicaSets, object("apps/v1", "ReplicaSet", "default", "b", ownedBy(d, false), ownedBy(other, false)))

	out, done, err := s.Delete(deployments, "default", "web", Preconditions{}, Propagation(metav1.DeletePropagationOrphan))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(done).To(BeFalse())
	g.Expect(out.GetFinalizers()).To(ConsistOf(metav1.FinalizerOrphanDependents))
	gone(g, s, deployments, "default", "web")
	idle(g, s)
	g.Expect(exists(g, s, replicaSets, "default", "a").GetOwnerReferences()).To(BeEmpty())
	b := exists(g, s, replicaSets, "default", "b")
	g.Expect(b.GetOwnerReferences()).To(HaveLen(1))
	g.Expect(b.GetOwnerReferences()[0].UID).To(Equal(other.GetUID()))

	// An orphan finalizer set beforehand decides when no policy is given.
	o := object("apps/v1", "Deployment", "default", "keeps")
	o.SetFinalizers([]string{metav1.FinalizerOrphanDependents})
	o = create(g, s, deployments, o)
	create(g, s, replicaSets, object("apps/v1", "ReplicaSet", "default", "kept", ownedBy(o, true)))
	_, _, err = s.Delete(deployments, "default", "keeps", Preconditions{})
	g.Expect(err).NotTo(HaveOccurred())
	gone(g, s, deployments, "default", "keeps")
	idle(g, s)
	g.Expect(exists(g, s, replicaSets, "default", "kept").GetOwnerReferences()).To(BeEmpty())
}

func TestDeletingAgainChangesThePolicy(t *testing.T) {
	g := NewWithT(t)
	s := New(Options{})
	d := create(g, s, deployments, object("apps/v1", "Deployment", "default", "web"))
	held := object("apps/v1", "ReplicaSet", "default", "held", ownedBy(d, true))
	held.SetFinalizers([]string{"example.com/hold"})
	create(g, s, replicaSets, held)
	free := object("apps/v1", "ReplicaSet", "default", "free", ownedBy(d, true))
	free.SetFinalizers([]string{"example.com/hold"})
	create(g, s, replicaSets, free)

	// Foreground, held by its dependents' finalizers...
	_, _, err := s.Delete(deployments, "default", "web", Preconditions{}, Propagation(metav1.DeletePropagationForeground))
	g.Expect(err).NotTo(HaveOccurred())
	idle(g, s)
	g.Expect(exists(g, s, deployments, "default", "web").GetFinalizers()).To(ConsistOf(metav1.FinalizerDeleteDependents))
	// ...then Orphan: the owner lets them go and goes.
	out, _, err := s.Delete(deployments, "default", "web", Preconditions{}, Propagation(metav1.DeletePropagationOrphan))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.GetFinalizers()).To(ConsistOf(metav1.FinalizerOrphanDependents))
	gone(g, s, deployments, "default", "web")
	idle(g, s)
	g.Expect(exists(g, s, replicaSets, "default", "free").GetOwnerReferences()).To(BeEmpty())
}

func TestDependentsOfAMissingOwnerAreCollected(t *testing.T) {
	g := NewWithT(t)
	s := New(Options{})
	nsB := object("v1", "Namespace", "", "b")
	create(g, s, Namespaces, nsB)
	elsewhere := create(g, s, deployments, object("apps/v1", "Deployment", "b", "web"))
	live := create(g, s, deployments, object("apps/v1", "Deployment", "default", "web"))

	missing := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: types.UID("no-such-uid")}
	create(g, s, replicaSets, object("apps/v1", "ReplicaSet", "default", "dangling", missing))
	// A namespaced owner in another namespace is absent to the dependent.
	create(g, s, replicaSets, object("apps/v1", "ReplicaSet", "default", "cross", ownedBy(elsewhere, false)))
	// A reference whose uid is live but names another object is dangling too.
	wrongName := ownedBy(live, false)
	wrongName.Name = "not-web"
	create(g, s, replicaSets, object("apps/v1", "ReplicaSet", "default", "wrong-name", wrongName))
	// A cluster-scoped dependent naming a namespaced kind cannot be resolved, and stays.
	create(g, s, crBindings, object("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "", "unresolvable", ownedBy(live, false)))
	create(g, s, replicaSets, object("apps/v1", "ReplicaSet", "default", "kept", ownedBy(live, false)))

	gone(g, s, replicaSets, "default", "dangling")
	gone(g, s, replicaSets, "default", "cross")
	gone(g, s, replicaSets, "default", "wrong-name")
	idle(g, s)
	exists(g, s, crBindings, "", "unresolvable")
	exists(g, s, replicaSets, "default", "kept")

	// The unresolvable dependent neither blocks its would-be owner's
	// foreground deletion nor loses its reference to an orphaning.
	blocking := ownedBy(live, true)
	create(g, s, crBindings, object("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "", "blocking", blocking))
	_, _, err := s.Delete(deployments, "default", "web", Preconditions{}, Propagation(metav1.DeletePropagationForeground))
	g.Expect(err).NotTo(HaveOccurred())
	gone(g, s, deployments, "default", "web")
	gone(g, s, replicaSets, "default", "kept")
	idle(g, s)
	g.Expect(exists(g, s, crBindings, "", "blocking").GetOwnerReferences()).To(HaveLen(1))
}

func TestAClusterScopedOwnerCollectsDependentsInEveryNamespace(t *testing.T) {
	g := NewWithT(t)
	s := New(Options{})
	n := create(g, s, nodes, node("n1"))
	create(g, s, pods, object("v1", "Pod", "default", "a", ownedBy(n, false)))
	create(g, s, pods, object("v1", "Pod", "kube-system", "b", ownedBy(n, false)))
	create(g, s, crBindings, object("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "", "c", ownedBy(n, false)))

	_, _, err := s.Delete(nodes, "", "n1", Preconditions{})
	g.Expect(err).NotTo(HaveOccurred())
	gone(g, s, pods, "default", "a")
	gone(g, s, pods, "kube-system", "b")
	gone(g, s, crBindings, "", "c")
}

func TestADependentWithSeveralOwnersStaysUntilAllAreGone(t *testing.T) {
	g := NewWithT(t)
	s := New(Options{})
	a := create(g, s, deployments, object("apps/v1", "Deployment", "default", "a"))
	b := create(g, s, deployments, object("apps/v1", "Deployment", "default", "b"))
	create(g, s, replicaSets, object("apps/v1", "ReplicaSet", "default", "shared", ownedBy(a, true), ownedBy(b, true)))

	_, _, err := s.Delete(deployments, "default", "a", Preconditions{})
	g.Expect(err).NotTo(HaveOccurred())
	// The reference to the gone owner is dropped; the other keeps it.
	g.Eventually(func() []metav1.OwnerReference {
		return exists(g, s, replicaSets, "default", "shared").GetOwnerReferences()
	}, gcTimeout).Should(ConsistOf(HaveField("UID", b.GetUID())))

	// Foreground deletion of the remaining owner takes it.
	_, _, err = s.Delete(deployments, "default", "b", Preconditions{}, Propagation(metav1.DeletePropagationForeground))
	g.Expect(err).NotTo(HaveOccurred())
	gone(g, s, replicaSets, "default", "shared")
	gone(g, s, deployments, "default", "b")

	// An owner deleted in the foreground releases a dependent another owner keeps.
	c := create(g, s, deployments, object("apps/v1", "Deployment", "default", "c"))
	d := create(g, s, deployments, object("apps/v1", "Deployment", "default", "d"))
	create(g, s, replicaSets, object("apps/v1", "ReplicaSet", "default", "kept", ownedBy(c, true), ownedBy(d, true)))
	_, _, err = s.Delete(deployments, "default", "c", Preconditions{}, Propagation(metav1.DeletePropagationForeground))
	g.Expect(err).NotTo(HaveOccurred())
	gone(g, s, deployments, "default", "c")
	idle(g, s)
	g.Expect(exists(g, s, replicaSets, "default", "kept").GetOwnerReferences()).To(ConsistOf(HaveField("UID", d.GetUID())))
}

func TestAForegroundCycleIsBroken(t *testing.T) {
	g := NewWithT(t)
	s := New(Options{})
	a := create(g, s, deployments, object("apps/v1", "Deployment", "default", "a"))
	b := create(g, s, deployments, object("apps/v1", "Deployment", "default", "b", ownedBy(a, true)))
	a.SetOwnerReferences([]metav1.OwnerReference{ownedBy(b, true)})
	_, err := s.Update(deployments, a)
	g.Expect(err).NotTo(HaveOccurred())

	_, _, err = s.Delete(deployments, "default", "a", Preconditions{}, Propagation(metav1.DeletePropagationForeground))
	g.Expect(err).NotTo(HaveOccurred())
	gone(g, s, deployments, "default", "a")
	gone(g, s, deployments, "default", "b")
}

func TestNamespaceDeletionKeepsGCSemantics(t *testing.T) {
	g := NewWithT(t)
	s := New(Options{})
	create(g, s, Namespaces, object("v1", "Namespace", "", "app"))
	n := create(g, s, nodes, node("n1"))
	d := create(g, s, deployments, object("apps/v1", "Deployment", "app", "web"))
	rs := create(g, s, replicaSets, object("apps/v1", "ReplicaSet", "app", "web-1", ownedBy(d, true)))
	create(g, s, pods, object("v1", "Pod", "app", "web-1-a", ownedBy(rs, true), ownedBy(n, false)))
	// An owner already being deleted in the foreground inside the namespace.
	held := object("apps/v1", "ReplicaSet", "app", "held", ownedBy(d, true))
	held.SetFinalizers([]string{"example.com/hold"})
	create(g, s, replicaSets, held)
	_, _, err := s.Delete(deployments, "app", "web", Preconditions{}, Propagation(metav1.DeletePropagationForeground))
	g.Expect(err).NotTo(HaveOccurred())

	_, _, err = s.Delete(Namespaces, "", "app", Preconditions{})
	g.Expect(err).NotTo(HaveOccurred())
	gone(g, s, deployments, "app", "web")
	gone(g, s, replicaSets, "app", "web-1")
	gone(g, s, pods, "app", "web-1-a")
	h := exists(g, s, replicaSets, "app", "held")
	exists(g, s, Namespaces, "", "app")
	h.SetFinalizers(nil)
	_, err = s.Update(replicaSets, h)
	g.Expect(err).NotTo(HaveOccurred())
	gone(g, s, Namespaces, "", "app")
	exists(g, s, nodes, "", "n1")

	// A namespace deleted in the foreground goes too, after its content.
	create(g, s, Namespaces, object("v1", "Namespace", "", "fg"))
	create(g, s, pods, object("v1", "Pod", "fg", "p"))
	_, _, err = s.Delete(Namespaces, "", "fg", Preconditions{}, Propagation(metav1.DeletePropagationForeground))
	g.Expect(err).NotTo(HaveOccurred())
	gone(g, s, Namespaces, "", "fg")
}

func TestGCMetadataIsValidated(t *testing.T) {
	g := NewWithT(t)
	s := New(Options{})
	_, err := s.Create(pods, object("v1", "Pod", "default", "no-uid", metav1.OwnerReference{APIVersion: "v1", Kind: "Node", Name: "n"}))
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
	both := object("v1", "Pod", "default", "both")
	both.SetFinalizers([]string{metav1.FinalizerOrphanDependents, metav1.FinalizerDeleteDependents})
	_, err = s.Create(pods, both)
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
}

// A store rebuilt from what a journal kept finishes what a restart
// interrupted: the collector's queue is not kept, it follows from the
// objects.
func TestRestoredStoreFinishesInterruptedCollection(t *testing.T) {
	g := NewWithT(t)
	before := New(Options{})
	fg := create(g, before, deployments, object("apps/v1", "Deployment", "default", "fg"))
	create(g, before, replicaSets, object("apps/v1", "ReplicaSet", "default", "fg-1", ownedBy(fg, true)))
	orphaning := create(g, before, deployments, object("apps/v1", "Deployment", "default", "orphaning"))
	create(g, before, replicaSets, object("apps/v1", "ReplicaSet", "default", "orphan-1", ownedBy(orphaning, true)))
	gone1 := create(g, before, deployments, object("apps/v1", "Deployment", "default", "gone"))
	create(g, before, replicaSets, object("apps/v1", "ReplicaSet", "default", "dangling", ownedBy(gone1, true)))

	// What the journal held at the moment of a kill: the owners marked,
	// the one deleted in the background gone, no dependent touched yet.
	var restored []Restored
	for _, res := range []Resource{Namespaces, deployments, replicaSets} {
		items, _, err := before.List(res, "", ListOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		for _, obj := range items {
			now := metav1.Now()
			switch obj.GetName() {
			case "gone":
				continue
			case "fg":
				obj.SetDeletionTimestamp(&now)
				obj.SetFinalizers([]string{metav1.FinalizerDeleteDependents})
			case "orphaning":
				obj.SetDeletionTimestamp(&now)
				obj.SetFinalizers([]string{metav1.FinalizerOrphanDependents})
			}
			restored = append(restored, Restored{Resource: res, Object: obj})
		}
	}
	before.Close()

	s := New(Options{Restored: restored})
	gone(g, s, replicaSets, "default", "fg-1")
	gone(g, s, deployments, "default", "fg")
	gone(g, s, deployments, "default", "orphaning")
	gone(g, s, replicaSets, "default", "dangling")
	idle(g, s)
	g.Expect(exists(g, s, replicaSets, "default", "orphan-1").GetOwnerReferences()).To(BeEmpty())
}

func TestOneCollectorServesManyStoresInTurn(t *testing.T) {
	g := NewWithT(t)
	c := NewCollector(CollectorOptions{Workers: 1, Batch: 5})
	defer c.Stop()
	big := New(Options{Collector: c})
	small := New(Options{Collector: c})
	owner := create(g, big, nodes, node("n"))
	for i := range 200 {
		create(g, big, pods, object("v1", "Pod", "default", "p"+strconv.Itoa(i), ownedBy(owner, false)))
	}
	smallOwner := create(g, small, nodes, node("n"))
	create(g, small, pods, object("v1", "Pod", "default", "p", ownedBy(smallOwner, false)))

	_, _, err := big.Delete(nodes, "", "n", Preconditions{})
	g.Expect(err).NotTo(HaveOccurred())
	_, _, err = small.Delete(nodes, "", "n", Preconditions{})
	g.Expect(err).NotTo(HaveOccurred())
	gone(g, small, pods, "default", "p")
	g.Eventually(func() int {
		items, _, _ := big.List(pods, "", ListOptions{})
		return len(items)
	}, gcTimeout).Should(BeZero())
}

func TestDeleteAllOfDeletesEveryObjectOfAResource(t *testing.T) {
	g := NewWithT(t)
	s := New(Options{})
	widgets := Resource{Group: "example.com", Resource: "widgets", Namespaced: true}
	w1 := create(g, s, widgets, object("example.com/v1", "Widget", "default", "a"))
	create(g, s, widgets, object("example.com/v1", "Widget", "kube-system", "b"))
	held := object("example.com/v1", "Widget", "default", "held")
	held.SetFinalizers([]string{"example.com/hold"})
	create(g, s, widgets, held)
	create(g, s, configMaps, object("v1", "ConfigMap", "default", "owned", ownedBy(w1, false)))
	create(g, s, configMaps, object("v1", "ConfigMap", "default", "other"))

	g.Expect(s.DeleteAllOf(widgets)).To(Equal(1))
	items, _, err := s.List(widgets, "", ListOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(items).To(HaveLen(1))
	g.Expect(items[0].GetDeletionTimestamp()).NotTo(BeNil())
	gone(g, s, configMaps, "default", "owned")
	idle(g, s)
	exists(g, s, configMaps, "default", "other")
}
