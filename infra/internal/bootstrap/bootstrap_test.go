package bootstrap_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/infra/internal/backend"
	"github.com/capi-monolith/capi-monolith/infra/internal/backend/inmemory"
	"github.com/capi-monolith/capi-monolith/infra/internal/bootstrap"
	"github.com/capi-monolith/capi-monolith/infra/internal/tasks"
	"github.com/capi-monolith/capi-monolith/test/kubeadmdata"
)

// inMemoryNode is an inMemory node whose simulated bootstrap takes delay,
// with its bootstrap Secret, ready for bootstrap.Reconcile.
func inMemoryNode(t *testing.T, delay time.Duration) (*v1alpha1.MonolithMachine, bootstrap.Options) {
	t.Helper()
	g := NewWithT(t)
	scheme := runtime.NewScheme()
	g.Expect(corev1.AddToScheme(scheme)).To(Succeed())
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "m-bootstrap"}, Data: map[string][]byte{"value": []byte(kubeadmdata.JoinWorker)}}
	b := inmemory.New(inmemory.Options{})
	node := backend.MachineRef{Cluster: backend.ClusterRef{Namespace: "ns", Name: "c"}, Name: "m"}
	_, err := b.EnsureNode(t.Context(), backend.NodeSpec{Machine: node, Backend: v1alpha1.MachineBackend{InMemory: &v1alpha1.InMemoryMachineBackend{
		BootstrapDelay: &metav1.Duration{Duration: delay},
	}}})
	g.Expect(err).NotTo(HaveOccurred())
	mm := &v1alpha1.MonolithMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "m", UID: "uid-1"}}
	return mm, bootstrap.Options{
		Client: fake.NewClientBuilder().WithScheme(scheme).WithObjects(secret).Build(),
		Tasks:  tasks.New(t.Context()), Backend: b, Node: node, SecretName: secret.Name,
	}
}

// The reconcile that starts a bootstrap reports the run's own first
// progress, and the reconciles while it runs report the same: no status
// write, and no change of the Machine's InfrastructureReady, between the
// start and the end. It used to report "Starting", which the next
// reconcile replaced.
func TestTheStartOfABootstrapReportsWhatTheReconcilesWhileItRunsReport(t *testing.T) {
	g := NewWithT(t)
	mm, opts := inMemoryNode(t, 10*time.Minute)
	first, _, err := bootstrap.Reconcile(t.Context(), mm, opts)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(first).To(Equal(bootstrap.Progress{Reason: v1alpha1.RunningReason, Message: "Running kubeadm join (simulated, 10m0s)"}))
	again, _, err := bootstrap.Reconcile(t.Context(), mm, opts)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again).To(Equal(first))
}

// A reconcile that reads the machine from a cache that has not caught up
// with the status patch recording the bootstrap's success must not run the
// bootstrap data again: the finished task is kept until
// status.bootstrap.succeeded is read back.
func TestABootstrapIsNotRunAgainByAReconcileThatReadsAStaleMachine(t *testing.T) {
	g := NewWithT(t)
	mm, opts := inMemoryNode(t, 10*time.Millisecond)
	key := string(mm.UID)
	_, _, err := bootstrap.Reconcile(t.Context(), mm, opts)
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() bool {
		state, ok := opts.Tasks.State(key)
		return ok && !state.Running
	}).WithTimeout(10 * time.Second).Should(BeTrue())

	for range 2 { // the reconcile the task's end triggers, then a stale one
		progress, _, err := bootstrap.Reconcile(t.Context(), mm, opts)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(progress.Succeeded).To(BeTrue())
		state, ok := opts.Tasks.State(key)
		g.Expect(ok).To(BeTrue())
		g.Expect(state.Running).To(BeFalse(), "no second run")
	}

	mm.Status.Bootstrap.Succeeded = ptr.To(true)
	progress, _, err := bootstrap.Reconcile(t.Context(), mm, opts)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(progress.Succeeded).To(BeTrue())
	_, ok := opts.Tasks.State(key)
	g.Expect(ok).To(BeFalse(), "forgotten once the record is read back")
}

// A run that does not finish (here the inMemory backend simulating an hour)
// is stopped at the deadline and reported as failed, naming it, instead of
// holding a goroutine and the machine for ever.
func TestABootstrapRunStopsAtItsDeadline(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	scheme := runtime.NewScheme()
	g.Expect(corev1.AddToScheme(scheme)).To(Succeed())
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "m-bootstrap"}, Data: map[string][]byte{"value": []byte(kubeadmdata.JoinWorker)}}
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

// Bootstrap data that inflates past the bound (issue 28: a write_files
// entry gunzipping to 512 MiB was reported bootstrapped) fails with its own
// reason and is never reported as succeeded.
func TestBootstrapDataPastTheBoundIsNeverBootstrapped(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	scheme := runtime.NewScheme()
	g.Expect(corev1.AddToScheme(scheme)).To(Succeed())
	var gz bytes.Buffer
	w, err := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	g.Expect(err).NotTo(HaveOccurred())
	zeros := make([]byte, 1<<20)
	for range 32 {
		_, err = w.Write(zeros)
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(w.Close()).To(Succeed())
	data := "#cloud-config\nwrite_files:\n- path: /big\n  encoding: gz+b64\n  content: " + base64.StdEncoding.EncodeToString(gz.Bytes()) + "\n"
	progress, _ := bootstrapInMemory(ctx, g, scheme, data)
	g.Expect(progress.Succeeded).To(BeFalse())
	g.Expect(progress.Reason).To(Equal(v1alpha1.InvalidBootstrapDataReason))
	g.Expect(progress.Message).To(ContainSubstring("decompresses to more than"))
}

// bootstrapInMemory runs data (the value of a bootstrap Secret read with
// scheme) on an inMemory node to its end, and returns how the bootstrap
// then stands.
func bootstrapInMemory(ctx context.Context, g Gomega, scheme *runtime.Scheme, data string) (bootstrap.Progress, ctrl.Result) {
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "m-bootstrap"}, Data: map[string][]byte{"value": []byte(data)}}
	reader := fake.NewClientBuilder().WithScheme(scheme).WithObjects(secret).Build()

	b := inmemory.New(inmemory.Options{})
	node := backend.MachineRef{Cluster: backend.ClusterRef{Namespace: "ns", Name: "c"}, Name: "m"}
	_, err := b.EnsureNode(ctx, backend.NodeSpec{Machine: node, Backend: v1alpha1.MachineBackend{InMemory: &v1alpha1.InMemoryMachineBackend{}}})
	g.Expect(err).NotTo(HaveOccurred())

	mm := &v1alpha1.MonolithMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "m", UID: "uid-1"}}
	opts := bootstrap.Options{Client: reader, Tasks: tasks.New(ctx), Backend: b, Node: node, SecretName: secret.Name}
	_, _, err = bootstrap.Reconcile(ctx, mm, opts)
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() bool {
		state, ok := opts.Tasks.State(string(mm.UID))
		return ok && !state.Running
	}).WithTimeout(10 * time.Second).Should(BeTrue())
	progress, result, err := bootstrap.Reconcile(ctx, mm, opts)
	g.Expect(err).NotTo(HaveOccurred())
	return progress, result
}

// Well-formed bootstrap data without kubeadm configuration (issue 28: it
// made an inMemory machine BootstrapExecSucceeded) fails with its own
// reason, saying what the backend runs, and is never reported as succeeded.
func TestBootstrapDataWithoutKubeadmConfigurationIsNeverBootstrapped(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	scheme := runtime.NewScheme()
	g.Expect(corev1.AddToScheme(scheme)).To(Succeed())
	data := "#cloud-config\nwrite_files:\n- path: /etc/motd\n  content: hello\nruncmd:\n- echo hello\n"
	progress, result := bootstrapInMemory(ctx, g, scheme, data)
	g.Expect(progress.Succeeded).To(BeFalse())
	g.Expect(progress.Reason).To(Equal(v1alpha1.UnsupportedBootstrapDataReason))
	g.Expect(progress.Message).To(ContainSubstring("the inMemory backend runs only kubeadm bootstrap data"))
	g.Expect(result.RequeueAfter).To(BeNumerically(">", 0), "retried, so that a corrected Secret is picked up")
}

// A machine whose status.bootstrap records a bootstrap that succeeded is
// reported bootstrapped without reading its data or running anything.
func TestAMachineRecordedBootstrappedIsNotRunAgain(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	mm := &v1alpha1.MonolithMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "m", UID: "uid-1"}}
	mm.Status.Bootstrap.Succeeded = ptr.To(true)
	opts := bootstrap.Options{Client: fake.NewClientBuilder().Build(), Tasks: tasks.New(ctx), SecretName: "missing"}
	progress, res, err := bootstrap.Reconcile(ctx, mm, opts)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.IsZero()).To(BeTrue())
	g.Expect(progress).To(Equal(bootstrap.Progress{Succeeded: true}))
	_, started := opts.Tasks.State(string(mm.UID))
	g.Expect(started).To(BeFalse())
}
