package bootstrap_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/infra/internal/backend"
	"github.com/capi-monolith/capi-monolith/infra/internal/backend/inmemory"
	"github.com/capi-monolith/capi-monolith/infra/internal/bootstrap"
	"github.com/capi-monolith/capi-monolith/infra/internal/tasks"
)

// A run that does not finish (here the inMemory backend simulating an hour)
// is stopped at the deadline and reported as failed, naming it, instead of
// holding a goroutine and the machine for ever.
func TestABootstrapRunStopsAtItsDeadline(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	scheme := runtime.NewScheme()
	g.Expect(corev1.AddToScheme(scheme)).To(Succeed())
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "m-bootstrap"}, Data: map[string][]byte{"value": []byte("#cloud-config\n")}}
	reader := fake.NewClientBuilder().WithScheme(scheme).WithObjects(secret).Build()

	b := inmemory.New(inmemory.Options{})
	node := backend.MachineRef{Cluster: backend.ClusterRef{Namespace: "ns", Name: "c"}, Name: "m"}
	_, err := b.EnsureNode(ctx, backend.NodeSpec{Machine: node, Backend: v1alpha1.MachineBackend{InMemory: &v1alpha1.InMemoryMachineBackend{
		BootstrapDelay: &metav1.Duration{Duration: time.Hour},
	}}})
	g.Expect(err).NotTo(HaveOccurred())

	mm := &v1alpha1.MonolithMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "m", UID: "uid-1"}}
	opts := bootstrap.Options{Client: reader, Tasks: tasks.New(ctx), Backend: b, Node: node, SecretName: secret.Name, Timeout: 200 * time.Millisecond}
	progress, _, err := bootstrap.Reconcile(ctx, mm, opts)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(progress.Reason).To(Equal(v1alpha1.RunningReason))

	g.Eventually(func() bool {
		state, ok := opts.Tasks.State(string(mm.UID))
		return ok && !state.Running
	}).WithTimeout(10 * time.Second).Should(BeTrue())
	progress, _, err = bootstrap.Reconcile(context.Background(), mm, opts)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(progress.Succeeded).To(BeFalse())
	g.Expect(progress.Reason).To(Equal(v1alpha1.FailedReason))
	g.Expect(progress.Message).To(Equal("bootstrap did not finish within 200ms"))
}
