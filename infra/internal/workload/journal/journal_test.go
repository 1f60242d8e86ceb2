package journal_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/journal"
	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
)

var configMaps = store.Resource{Resource: "configmaps", Namespaced: true}

func configMap(name, value string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("v1")
	u.SetKind("ConfigMap")
	u.SetNamespace("default")
	u.SetName(name)
	_ = unstructured.SetNestedField(u.Object, value, "data", "k")
	_ = unstructured.SetNestedField(u.Object, int64(3), "spec", "replicas")
	return u
}

// open opens the journal at path and a store restored from it.
func open(g Gomega, path string, compactAfter int64) (*journal.Journal, *store.Store) {
	j, restored, err := journal.Open(journal.Options{Path: path, CompactAfter: compactAfter})
	g.Expect(err).NotTo(HaveOccurred())
	return j, store.New(store.Options{Restored: restored, Journal: j})
}

// What was written survives a restart unchanged (uid, resourceVersion,
// generation, whole numbers as int64), deletions stay deleted, and the
// restored store's resourceVersions go on past the old ones, so that a
// watch from before the restart gets 410 Gone and relists.
func TestObjectsSurviveARestart(t *testing.T) {
	g := NewWithT(t)
	path := filepath.Join(t.TempDir(), "ns", "c.journal")
	j, s := open(g, path, 0)

	kept, err := s.Create(configMaps, configMap("kept", "v1"))
	g.Expect(err).NotTo(HaveOccurred())
	kept.SetResourceVersion("")
	_ = unstructured.SetNestedField(kept.Object, "v2", "data", "k")
	kept, err = s.Update(configMaps, kept)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = s.Create(configMaps, configMap("gone", "x"))
	g.Expect(err).NotTo(HaveOccurred())
	_, _, err = s.Delete(configMaps, "default", "gone", store.Preconditions{})
	g.Expect(err).NotTo(HaveOccurred())
	before := s.ResourceVersion()
	// Not closed: as after SIGKILL, only what was written counts.

	_, s2 := open(g, path, 0)
	got, err := s2.Get(configMaps, "default", "kept")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Object).To(Equal(kept.Object), "the object is restored as it was stored")
	replicas, found, err := unstructured.NestedInt64(got.Object, "spec", "replicas")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(BeTrue())
	g.Expect(replicas).To(Equal(int64(3)))
	_, err = s2.Get(configMaps, "default", "gone")
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "a deleted object stays deleted")
	_, err = s2.Get(store.Namespaces, "", "kube-system")
	g.Expect(err).NotTo(HaveOccurred())

	g.Expect(rv(g, s2.ResourceVersion())).To(BeNumerically(">=", rv(g, before)), "resourceVersions only go forward")
	_, err = s2.Watch(configMaps, "default", store.WatchOptions{ResourceVersion: before})
	g.Expect(apierrors.IsResourceExpired(err) || apierrors.IsGone(err)).To(BeTrue(), "a watch from before the restart relists: %v", err)
	g.Expect(j.Close()).To(Succeed())
}

func rv(g Gomega, s string) uint64 {
	v, err := strconv.ParseUint(s, 10, 64)
	g.Expect(err).NotTo(HaveOccurred())
	return v
}

// A line torn by a crash mid-write is the last one and is ignored; a bad
// line with more after it is corruption and refused with its line number.
func TestATornLastLineIsIgnoredAndCorruptionRefused(t *testing.T) {
	g := NewWithT(t)
	path := filepath.Join(t.TempDir(), "c.journal")
	j, s := open(g, path, 0)
	_, err := s.Create(configMaps, configMap("a", "1"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(j.Close()).To(Succeed())

	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = f.WriteString(`{"rv":99,"resource":"configmaps","name":"b","obj`)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(f.Close()).To(Succeed())

	j2, s2 := open(g, path, 0)
	_, err = s2.Get(configMaps, "default", "a")
	g.Expect(err).NotTo(HaveOccurred())
	// The torn line is gone from the file: the next change is a line of
	// its own, not glued to it.
	_, err = s2.Create(configMaps, configMap("c", "3"))
	g.Expect(err).NotTo(HaveOccurred())
	s2.Close()
	g.Expect(j2.Close()).To(Succeed())
	_, s3 := open(g, path, 0)
	for _, name := range []string{"a", "c"} {
		_, err = s3.Get(configMaps, "default", name)
		g.Expect(err).NotTo(HaveOccurred(), name)
	}

	data, err := os.ReadFile(path)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.WriteFile(path, append([]byte("not json\n"), data...), 0o600)).To(Succeed())
	_, _, err = journal.Open(journal.Options{Path: path})
	g.Expect(err).To(MatchError(ContainSubstring("is corrupt at line 1")))
}

// Many changes of few objects keep the file proportional to the objects:
// it is compacted once it is twice their size and past CompactAfter.
func TestTheJournalIsCompacted(t *testing.T) {
	g := NewWithT(t)
	path := filepath.Join(t.TempDir(), "c.journal")
	j, s := open(g, path, 64<<10)
	for i := range 2000 {
		obj, err := s.Get(configMaps, "default", "hot")
		if apierrors.IsNotFound(err) {
			_, err = s.Create(configMaps, configMap("hot", "0"))
			g.Expect(err).NotTo(HaveOccurred())
			continue
		}
		g.Expect(err).NotTo(HaveOccurred())
		_ = unstructured.SetNestedField(obj.Object, strconv.Itoa(i), "data", "k")
		_, err = s.Update(configMaps, obj)
		g.Expect(err).NotTo(HaveOccurred())
	}
	info, err := os.Stat(path)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(info.Size()).To(BeNumerically("<", 128<<10), "compacted: 2,000 changes of one object")
	g.Expect(info.Mode().Perm()).To(Equal(os.FileMode(0o600)))

	_, s2 := open(g, path, 64<<10)
	got, err := s2.Get(configMaps, "default", "hot")
	g.Expect(err).NotTo(HaveOccurred())
	value, _, _ := unstructured.NestedString(got.Object, "data", "k")
	g.Expect(value).To(Equal("1999"), "the last change survives compaction")
	g.Expect(j.Close()).To(Succeed())
}

// A journal closed cleanly is compact and is reopened as it is; one left
// with history (the process was killed) is compacted when opened. Either
// way what was written is there.
func TestOpenCompactsOnlyAJournalWithHistory(t *testing.T) {
	g := NewWithT(t)
	path := filepath.Join(t.TempDir(), "c.journal")
	j, s := open(g, path, 0)
	_, err := s.Create(configMaps, configMap("a", "1"))
	g.Expect(err).NotTo(HaveOccurred())
	s.Close()
	g.Expect(j.Close()).To(Succeed())
	closed, err := os.Stat(path)
	g.Expect(err).NotTo(HaveOccurred())

	j, s = open(g, path, 0)
	reopened, err := os.Stat(path)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.SameFile(closed, reopened)).To(BeTrue(), "a compact journal is not rewritten")
	obj, err := s.Get(configMaps, "default", "a")
	g.Expect(err).NotTo(HaveOccurred())
	for i := range 5 {
		_ = unstructured.SetNestedField(obj.Object, strconv.Itoa(i), "data", "k")
		obj, err = s.Update(configMaps, obj)
		g.Expect(err).NotTo(HaveOccurred())
	}
	// Killed: no Close. The file holds six lines of the object.
	linesOfA := func() int {
		data, err := os.ReadFile(path)
		g.Expect(err).NotTo(HaveOccurred())
		return strings.Count(string(data), `"name":"a","object":`)
	}
	g.Expect(linesOfA()).To(Equal(6))

	_, s = open(g, path, 0)
	g.Expect(linesOfA()).To(Equal(1), "compacted: one line per object")
	got, err := s.Get(configMaps, "default", "a")
	g.Expect(err).NotTo(HaveOccurred())
	value, _, _ := unstructured.NestedString(got.Object, "data", "k")
	g.Expect(value).To(Equal("4"))
	g.Expect(got.GetResourceVersion()).To(Equal(obj.GetResourceVersion()))
}

// A cluster that is gone takes its journal with it.
func TestDiscardRemovesTheFile(t *testing.T) {
	g := NewWithT(t)
	path := filepath.Join(t.TempDir(), "c.journal")
	j, s := open(g, path, 0)
	_, err := s.Create(configMaps, configMap("a", "1"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(j.Discard()).To(Succeed())
	_, err = os.Stat(path)
	g.Expect(os.IsNotExist(err)).To(BeTrue())
	_, s2 := open(g, path, 0)
	_, err = s2.Get(configMaps, "default", "a")
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
}

// Deletions the garbage collector had not finished when the process was
// killed are finished by the restarted one: a foreground deletion waiting
// for its dependents, an orphaning one, and the dependents of an owner
// deleted in the background.
func TestGarbageCollectionInterruptedByARestartIsFinished(t *testing.T) {
	g := NewWithT(t)
	path := filepath.Join(t.TempDir(), "ns", "c.journal")
	// A collector that never runs: the process is killed before it does.
	stopped := store.NewCollector(store.CollectorOptions{Workers: 1})
	stopped.Stop()
	j, restored, err := journal.Open(journal.Options{Path: path})
	g.Expect(err).NotTo(HaveOccurred())
	s := store.New(store.Options{Restored: restored, Journal: j, Collector: stopped})

	owned := func(name string, owner *unstructured.Unstructured) {
		dep := configMap(name, "x")
		dep.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.GetName(), UID: owner.GetUID(), BlockOwnerDeletion: ptr.To(true)}})
		_, err := s.Create(configMaps, dep)
		g.Expect(err).NotTo(HaveOccurred())
	}
	for _, policy := range []metav1.DeletionPropagation{metav1.DeletePropagationForeground, metav1.DeletePropagationOrphan, metav1.DeletePropagationBackground} {
		owner, err := s.Create(configMaps, configMap(strings.ToLower(string(policy)), "x"))
		g.Expect(err).NotTo(HaveOccurred())
		owned(owner.GetName()+"-dep", owner)
		_, _, err = s.Delete(configMaps, "default", owner.GetName(), store.Preconditions{}, store.Propagation(policy))
		g.Expect(err).NotTo(HaveOccurred())
	}
	_, err = s.Get(configMaps, "default", "foreground")
	g.Expect(err).NotTo(HaveOccurred(), "nothing was collected before the kill")
	// Not closed: as after SIGKILL.

	_, s2 := open(g, path, 0)
	for _, name := range []string{"foreground-dep", "foreground", "orphan", "background-dep"} {
		g.Eventually(func() bool {
			_, err := s2.Get(configMaps, "default", name)
			return apierrors.IsNotFound(err)
		}, 5*time.Second).Should(BeTrue(), "%s is collected after the restart", name)
	}
	g.Eventually(func() []metav1.OwnerReference {
		dep, err := s2.Get(configMaps, "default", "orphan-dep")
		g.Expect(err).NotTo(HaveOccurred())
		return dep.GetOwnerReferences()
	}, 5*time.Second).Should(BeEmpty())
}
