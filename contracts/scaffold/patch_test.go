package scaffold_test

import (
	"context"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/capi-monolith/capi-monolith/contracts/scaffold"
)

// writeLog is a client that records its patches, "patch" or "patch status",
// in the order they were sent.
type writeLog struct {
	mu     sync.Mutex
	writes []string
}

func (l *writeLog) client(t *testing.T) client.Client {
	t.Helper()
	c, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return interceptor.NewClient(c, interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			l.record("patch")
			return c.Patch(ctx, obj, patch, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			l.record("patch " + sub)
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	})
}

func (l *writeLog) record(w string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.writes = append(l.writes, w)
}

func (l *writeLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.writes...)
}

func readyCondition(generation int64) metav1.Condition {
	return metav1.Condition{
		Type: clusterv1.ReadyCondition, Status: metav1.ConditionTrue, Reason: "Provisioned",
		ObservedGeneration: generation,
	}
}

var endpoint = clusterv1.APIEndpoint{Host: "127.0.0.1", Port: 20001}

// write writes before → after as a sole writer and returns the requests it
// sent and the Cluster as stored after them.
func write(t *testing.T, before, after *clusterv1.Cluster) ([]string, *clusterv1.Cluster) {
	t.Helper()
	g := NewWithT(t)
	var log writeLog
	g.Expect(scaffold.PatchAsSoleWriter(context.Background(), log.client(t), before, after)).To(Succeed())
	stored := &clusterv1.Cluster{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(before), stored)).To(Succeed())
	return log.all(), stored
}

// A reconcile that changes spec and conditions writes spec first, and its
// conditions name the generation that spec change made: nothing is left
// for the next reconcile to write.
func TestSoleWriterConditionsObserveTheGenerationOfTheirOwnSpecChange(t *testing.T) {
	g := NewWithT(t)
	cluster := newCluster(t, newNamespace(t), "spec-and-status", false)
	before := cluster.DeepCopy()
	after := cluster.DeepCopy()
	after.Spec.ControlPlaneEndpoint = endpoint
	conditions.Set(after, readyCondition(before.Generation))

	writes, got := write(t, before, after)

	g.Expect(writes).To(Equal([]string{"patch", "patch status"}))
	g.Expect(got.Generation).To(Equal(before.Generation + 1))
	g.Expect(got.Spec.ControlPlaneEndpoint).To(Equal(endpoint))
	g.Expect(conditions.Get(got, clusterv1.ReadyCondition).ObservedGeneration).To(Equal(got.Generation))
}

// A spec change alone still writes the conditions, now naming the new
// generation: else the reconcile the spec change triggers would.
func TestSoleWriterSpecChangeAloneCarriesTheConditionsForward(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	cluster := newCluster(t, newNamespace(t), "spec-only", false)
	conditions.Set(cluster, readyCondition(cluster.Generation))
	g.Expect(env.Client.Status().Update(ctx, cluster)).To(Succeed())
	before := cluster.DeepCopy()
	after := cluster.DeepCopy()
	after.Spec.ControlPlaneEndpoint = endpoint

	writes, got := write(t, before, after)

	g.Expect(writes).To(Equal([]string{"patch", "patch status"}))
	g.Expect(conditions.Get(got, clusterv1.ReadyCondition).ObservedGeneration).To(Equal(got.Generation))
}

// When another writer's spec change landed since the reconcile read the
// object, its conditions did not see that change and keep their
// generation.
func TestSoleWriterConditionsKeepTheirGenerationWhenAnotherSpecChangeLanded(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	cluster := newCluster(t, newNamespace(t), "concurrent-spec", false)
	before := cluster.DeepCopy()
	after := cluster.DeepCopy()
	after.Spec.ControlPlaneEndpoint = endpoint
	conditions.Set(after, readyCondition(before.Generation))

	other := cluster.DeepCopy()
	other.Spec.Paused = ptr.To(true)
	g.Expect(env.Client.Update(ctx, other)).To(Succeed())

	_, got := write(t, before, after)

	g.Expect(got.Generation).To(Equal(before.Generation + 2))
	g.Expect(got.Spec.ControlPlaneEndpoint).To(Equal(endpoint))
	g.Expect(conditions.Get(got, clusterv1.ReadyCondition).ObservedGeneration).To(Equal(before.Generation))
}

// With nothing but status changed, one request is sent.
func TestSoleWriterStatusChangeAloneIsOneRequest(t *testing.T) {
	g := NewWithT(t)
	cluster := newCluster(t, newNamespace(t), "status-only", false)
	before := cluster.DeepCopy()
	after := cluster.DeepCopy()
	conditions.Set(after, readyCondition(before.Generation))

	writes, got := write(t, before, after)

	g.Expect(writes).To(Equal([]string{"patch status"}))
	g.Expect(got.Generation).To(Equal(before.Generation))
	g.Expect(conditions.Get(got, clusterv1.ReadyCondition).ObservedGeneration).To(Equal(before.Generation))
}

// For an object being deleted, status goes first: removing the last
// finalizer makes the object go, and a status patch after it would fail.
func TestSoleWriterWritesStatusBeforeTheLastFinalizerGoes(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	cluster := newCluster(t, newNamespace(t), "deleting", false)
	controllerutil.AddFinalizer(cluster, finalizer)
	g.Expect(env.Client.Update(ctx, cluster)).To(Succeed())
	g.Expect(env.Client.Delete(ctx, cluster)).To(Succeed())
	get(g, cluster)
	g.Expect(cluster.DeletionTimestamp.IsZero()).To(BeFalse())
	before := cluster.DeepCopy()
	after := cluster.DeepCopy()
	conditions.Set(after, metav1.Condition{Type: clusterv1.ReadyCondition, Status: metav1.ConditionFalse, Reason: "Deleting"})
	controllerutil.RemoveFinalizer(after, finalizer)

	var log writeLog
	g.Expect(scaffold.PatchAsSoleWriter(ctx, log.client(t), before, after)).To(Succeed())

	g.Expect(log.all()).To(Equal([]string{"patch status", "patch"}))
	err := env.Client.Get(ctx, client.ObjectKeyFromObject(cluster), &clusterv1.Cluster{})
	g.Expect(client.IgnoreNotFound(err)).To(Succeed())
	g.Expect(err).To(HaveOccurred(), "the Cluster is gone once its last finalizer is")
}
