package secretjournal_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/secretjournal"
	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
)

const timeout = 30 * time.Second

func open(g Gomega, ctx context.Context, opts secretjournal.Options) (*secretjournal.Journal, *store.Store) {
	if opts.Client == nil {
		opts.Client = env.Client
	}
	j, restored, lastRV, err := secretjournal.Open(ctx, opts)
	g.Expect(err).NotTo(HaveOccurred())
	s := store.New(store.Options{Restored: restored, Journal: j, InitialResourceVersion: max(lastRV, uint64(time.Now().UnixMicro()))})
	return j, s
}

func stateSecrets(g Gomega, ctx context.Context, namespace, cluster string) []corev1.Secret {
	list := &corev1.SecretList{}
	g.Expect(env.Client.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels{secretjournal.LabelStateOf: cluster})).To(Succeed())
	return list.Items
}

// What was written (created, updated, deleted) is read back by the next
// Open, unchanged (uid, resourceVersion), and the store built from it only
// hands out later resourceVersions, also past a deletion's.
func TestObjectsSurviveAReopen(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := env.Namespace(t, "reopen")
	cluster := types.NamespacedName{Namespace: ns, Name: "a"}
	j, s := open(g, ctx, secretjournal.Options{Cluster: cluster})
	kept, err := s.Create(configMaps, configMap("kept", "1"))
	g.Expect(err).NotTo(HaveOccurred())
	kept.Object["data"] = map[string]any{"value": "2"}
	kept, err = s.Update(configMaps, kept)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = s.Create(configMaps, configMap("gone", "1"))
	g.Expect(err).NotTo(HaveOccurred())
	_, _, err = s.Delete(configMaps, "default", "gone", store.Preconditions{})
	g.Expect(err).NotTo(HaveOccurred())
	last, err := strconv.ParseUint(s.ResourceVersion(), 10, 64)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(j.Wait(ctx)).To(Succeed())
	g.Expect(j.Close()).To(Succeed())

	j, lastRV := reopen(g, ctx, secretjournal.Options{Client: env.Client, Cluster: cluster, Resume: true})
	defer j.Close()
	g.Expect(lastRV).To(Equal(last), "the deletion's version is the last")
}

// reopen opens cluster's journal and returns it with the last version; the
// restored objects are checked by the caller through a store.
func reopen(g Gomega, ctx context.Context, opts secretjournal.Options) (*secretjournal.Journal, uint64) {
	j, restored, lastRV, err := secretjournal.Open(ctx, opts)
	g.Expect(err).NotTo(HaveOccurred())
	s := store.New(store.Options{Restored: restored, Journal: j})
	got, err := s.Get(configMaps, "default", "kept")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Object["data"]).To(Equal(map[string]any{"value": "2"}))
	_, err = s.Get(configMaps, "default", "gone")
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
	return j, lastRV
}

// A store started from a reopened journal gives versions past every
// version the journal recorded; a cluster opened without Resume, or by
// another owner, starts empty and its Secrets are gone.
func TestResumeOnlyForTheSameOwner(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := env.Namespace(t, "owner")
	cluster := types.NamespacedName{Namespace: ns, Name: "a"}
	owner := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: "11111111-1111-1111-1111-111111111111"}
	j, s := open(g, ctx, secretjournal.Options{Cluster: cluster, Owner: owner})
	created, err := s.Create(configMaps, configMap("kept", "1"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(j.Wait(ctx)).To(Succeed())
	g.Expect(j.Close()).To(Succeed())
	head := stateSecrets(g, ctx, ns, "a")
	g.Expect(head).To(HaveLen(1))
	g.Expect(head[0].OwnerReferences).To(ConsistOf(owner))
	g.Expect(head[0].Labels).To(HaveKeyWithValue("cluster.x-k8s.io/cluster-name", "a"))

	j, s = open(g, ctx, secretjournal.Options{Cluster: cluster, Owner: owner, Resume: true})
	got, err := s.Get(configMaps, "default", "kept")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.GetUID()).To(Equal(created.GetUID()))
	next, err := s.Create(configMaps, configMap("next", "1"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(strconv.ParseUint(next.GetResourceVersion(), 10, 64)).To(BeNumerically(">", mustRV(g, created.GetResourceVersion())))
	g.Expect(j.Wait(ctx)).To(Succeed())
	g.Expect(j.Close()).To(Succeed())

	other := owner
	other.UID = "22222222-2222-2222-2222-222222222222"
	j, s = open(g, ctx, secretjournal.Options{Cluster: cluster, Owner: other, Resume: true})
	_, err = s.Get(configMaps, "default", "kept")
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "another owner's state is an earlier cluster's")
	g.Expect(j.Close()).To(Succeed())

	j, s = open(g, ctx, secretjournal.Options{Cluster: cluster, Owner: other})
	_, err = s.Get(configMaps, "default", "kept")
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
	g.Expect(j.Discard()).To(Succeed())
	g.Expect(stateSecrets(g, ctx, ns, "a")).To(BeEmpty(), "a discarded cluster leaves no Secret")
}

func mustRV(g Gomega, rv string) uint64 {
	v, err := strconv.ParseUint(rv, 10, 64)
	g.Expect(err).NotTo(HaveOccurred())
	return v
}

// A state past the delta limit is written as a snapshot cut into chunks,
// each Secret under the 1 MiB limit, an object larger than a chunk
// included; the previous generation's chunks are deleted; all of it reads
// back.
func TestSnapshotsAreChunkedUnderTheSecretLimit(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := env.Namespace(t, "chunks")
	cluster := types.NamespacedName{Namespace: ns, Name: "big"}
	j, s := open(g, ctx, secretjournal.Options{Cluster: cluster})
	// Random data does not compress: 1.4 MiB across three chunks at least.
	big := make([]byte, 1<<20)
	_, _ = rand.Read(big)
	_, err := s.Create(configMaps, configMap("big", base64.StdEncoding.EncodeToString(big)))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(j.Wait(ctx)).To(Succeed())
	for i := range 20 {
		_, err := s.Create(configMaps, configMap("small-"+strconv.Itoa(i), strings.Repeat("x", 10<<10)))
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(j.Wait(ctx)).To(Succeed())
	secrets := stateSecrets(g, ctx, ns, "big")
	g.Expect(len(secrets)).To(BeNumerically(">=", 4), "a head and three chunks at least")
	generations := map[string]bool{}
	for _, sec := range secrets {
		size := 0
		for _, v := range sec.Data {
			size += len(v)
		}
		g.Expect(size).To(BeNumerically("<", 1<<20), sec.Name)
		if sec.Name != secretjournal.HeadName("big") {
			generations[strings.Split(strings.TrimPrefix(sec.Name, secretjournal.HeadName("big")+"-"), "-")[0]] = true
		}
	}
	g.Expect(generations).To(HaveLen(1), "only the head's generation is kept")
	g.Expect(j.Close()).To(Succeed())

	j, s = open(g, ctx, secretjournal.Options{Cluster: cluster, Resume: true})
	defer j.Close()
	got, err := s.Get(configMaps, "default", "big")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Object["data"]).To(Equal(map[string]any{"value": base64.StdEncoding.EncodeToString(big)}))
	for i := range 20 {
		_, err := s.Get(configMaps, "default", "small-"+strconv.Itoa(i))
		g.Expect(err).NotTo(HaveOccurred())
	}
}

// Changes are group-committed: concurrent writers share the head's writes,
// which start at least FlushInterval apart; every writer's Wait returns
// once its change is written.
func TestChangesAreGroupCommitted(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := env.Namespace(t, "group")
	var mu sync.Mutex
	var writes []time.Time
	watching, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Client.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())
	counting := interceptor.NewClient(watching, interceptor.Funcs{
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			mu.Lock()
			writes = append(writes, time.Now())
			mu.Unlock()
			return c.Update(ctx, obj, opts...)
		},
	})
	const interval = 200 * time.Millisecond
	j, s := open(g, ctx, secretjournal.Options{Client: counting, Cluster: types.NamespacedName{Namespace: ns, Name: "a"}, FlushInterval: interval})
	defer j.Close()
	g.Expect(j.Wait(ctx)).To(Succeed())
	const writers, each = 50, 4
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				if _, err := s.Create(configMaps, configMap("cm-"+strconv.Itoa(w)+"-"+strconv.Itoa(i), "v")); err != nil {
					errs <- err
					return
				}
				if err := j.Wait(ctx); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		g.Expect(err).NotTo(HaveOccurred())
	}
	mu.Lock()
	defer mu.Unlock()
	g.Expect(len(writes)).To(BeNumerically("<", writers*each), "writes are shared")
	for i := 1; i < len(writes); i++ {
		g.Expect(writes[i].Sub(writes[i-1])).To(BeNumerically(">=", interval-10*time.Millisecond), "one write per interval at most")
	}
	t.Logf("%d changes in %d head writes", writers*each, len(writes))
}

// A head another process wrote is not overwritten: the journal stops and
// its waiters get ErrConflict.
func TestAnotherWriterStopsTheJournal(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := env.Namespace(t, "conflict")
	j, s := open(g, ctx, secretjournal.Options{Cluster: types.NamespacedName{Namespace: ns, Name: "a"}})
	defer j.Close()
	g.Expect(j.Wait(ctx)).To(Succeed())
	head := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: secretjournal.HeadName("a")}, head)).To(Succeed())
	head.Annotations = map[string]string{"someone": "else"}
	g.Expect(env.Client.Update(ctx, head)).To(Succeed())
	_, err := s.Create(configMaps, configMap("late", "v"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(j.Wait(ctx)).To(MatchError(secretjournal.ErrConflict))
}

// A process SIGKILLed while it writes loses nothing it acknowledged: every
// change whose Wait returned is read back.
func TestAKillMidWriteLosesNothingAcknowledged(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := env.Namespace(t, "kill")
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	g.Expect(env.WriteKubeconfig(kubeconfig)).To(Succeed())
	exe, err := os.Executable()
	g.Expect(err).NotTo(HaveOccurred())
	cmd := exec.CommandContext(ctx, exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), writerEnv+"="+kubeconfig, "SECRETJOURNAL_WRITER_NAMESPACE="+ns)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cmd.Start()).To(Succeed())
	acked := map[string]bool{}
	lines := bufio.NewScanner(out)
	for lines.Scan() {
		name, ok := strings.CutPrefix(lines.Text(), "ack ")
		g.Expect(ok).To(BeTrue(), lines.Text())
		acked[name] = true
		if len(acked) == 300 {
			// Mid-write: 16 writers have changes pending or being written.
			g.Expect(cmd.Process.Signal(syscall.SIGKILL)).To(Succeed())
		}
	}
	_ = cmd.Wait()
	g.Expect(cmd.ProcessState.Sys().(syscall.WaitStatus).Signaled()).To(BeTrue(), "the writer was killed")

	j, restored, _, err := secretjournal.Open(ctx, secretjournal.Options{Client: env.Client, Cluster: types.NamespacedName{Namespace: ns, Name: "killed"}, Resume: true})
	g.Expect(err).NotTo(HaveOccurred())
	defer j.Close()
	found := map[string]bool{}
	for _, r := range restored {
		found[r.Object.GetName()] = true
	}
	for name := range acked {
		g.Expect(found).To(HaveKey(name), "acknowledged, then lost")
	}
	t.Logf("%d acknowledged, %d kept", len(acked), len(found))
}

// The chunks a compaction killed midway left (a generation the head does
// not name) are deleted once the journal is open again, and what the head
// names is read back whole.
func TestChunksAnInterruptedCompactionLeftAreDeleted(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := env.Namespace(t, "sweep")
	cluster := types.NamespacedName{Namespace: ns, Name: "a"}
	j, s := open(g, ctx, secretjournal.Options{Cluster: cluster})
	_, err := s.Create(configMaps, configMap("kept", "1"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(j.Wait(ctx)).To(Succeed())
	g.Expect(j.Close()).To(Succeed())
	left := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{
		Namespace: ns, Name: secretjournal.HeadName("a") + "-7-0",
		Labels: map[string]string{secretjournal.LabelStateOf: "a"},
	}, Type: secretjournal.SecretType, Data: map[string][]byte{"snapshot": []byte("torn")}}
	g.Expect(env.Client.Create(ctx, left)).To(Succeed())

	j, s = open(g, ctx, secretjournal.Options{Cluster: cluster, Resume: true})
	_, err = s.Get(configMaps, "default", "kept")
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() error {
		return env.Client.Get(ctx, client.ObjectKeyFromObject(left), &corev1.Secret{})
	}, 10*time.Second).Should(Satisfy(apierrors.IsNotFound), "the torn chunk is deleted")
	g.Expect(stateSecrets(g, ctx, ns, "a")).To(HaveLen(1), "the head alone is left")
	g.Expect(j.Close()).To(Succeed())
}
