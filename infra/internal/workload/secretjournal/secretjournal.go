package secretjournal

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/journal"
	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
)

// Defaults of Options.
const (
	DefaultFlushInterval = 100 * time.Millisecond
	DefaultDeltaLimit    = 128 << 10
	DefaultChunkSize     = 512 << 10
)

// LabelStateOf labels every state Secret with its cluster's name.
const LabelStateOf = "workload.capi-monolith.dev/state-of"

// SecretType is the type of every state Secret.
const SecretType corev1.SecretType = "workload.capi-monolith.dev/state"

// Keys of the head Secret's data.
const (
	keyGeneration = "generation"
	keyChunks     = "chunks"
	keyDelta      = "delta"
	keyRV         = "resourceVersion"
	keySnapshot   = "snapshot"
)

// closeTimeout bounds the last flush of Close and the deletions of
// Discard, which take no context.
const closeTimeout = 30 * time.Second

// ErrConflict is the failure of a journal whose head another process wrote.
var ErrConflict = errors.New("another process writes this workload cluster's state")

// Options configure a Journal.
type Options struct {
	// Client reads and writes the state Secrets; reads must not come from
	// a cache (the manager's API reader semantics). Required.
	Client client.Client
	// Cluster is the workload cluster; its Secrets live in its namespace.
	Cluster types.NamespacedName
	// Owner owns every state Secret (the MonolithCluster), so that the
	// garbage collector deletes them with it and `clusterctl move` moves
	// them with it. A head owned by another UID is an earlier cluster's
	// state: it is discarded. Optional.
	Owner metav1.OwnerReference
	// Resume reads the state back; false discards whatever is there (a
	// cluster served for the first time starts empty).
	Resume bool
	// FlushInterval is the least time between two writes of the head.
	// Default DefaultFlushInterval.
	FlushInterval time.Duration
	// DeltaLimit is the size of the delta past which a new snapshot is
	// written. Default DefaultDeltaLimit.
	DeltaLimit int
	// ChunkSize is the most bytes of snapshot per chunk Secret. Default
	// DefaultChunkSize.
	ChunkSize int
	// Log receives write failures.
	Log logr.Logger
}

// HeadName is the name of cluster's head Secret.
func HeadName(cluster string) string { return cluster + "-workload-state" }

func chunkName(cluster string, generation, i int) string {
	return fmt.Sprintf("%s-%d-%d", HeadName(cluster), generation, i)
}

type key struct {
	group, resource, namespace, name string
}

// live is an object kept, as its JSON: the store's encoding, shared with
// it.
type live struct {
	res             store.Resource
	namespace, name string
	raw             []byte
	rv              uint64
}

// Journal is one cluster's state in Secrets. It implements store.Journal;
// it is safe for concurrent use.
type Journal struct {
	opts Options
	log  logr.Logger

	mu        sync.Mutex
	objects   map[key]live
	pending   []byte
	seq       uint64 // changes recorded
	persisted uint64 // changes written
	lastRV    uint64
	failed    error         // permanent: nothing more is written
	done      chan struct{} // closed and replaced whenever persisted or failed changes
	closed    bool

	// Owned by the flusher.
	head       *corev1.Secret
	generation int
	chunks     int
	delta      []byte
	// sweep, set by load, makes the flusher delete the chunks of every
	// generation but *sweep before its first write: what a compaction
	// killed midway left. Not during Open, so that serving a cluster waits
	// for one read of its head, not for a list of its Secrets.
	sweep *int

	kick    chan struct{}
	stop    chan struct{}
	stopped chan struct{}
	discard bool
}

// Open reads the cluster's state (with opts.Resume) and starts the journal
// of the changes to come. It returns the objects kept, for
// store.Options.Restored, and the last resourceVersion the state recorded,
// which the store must start past (a deletion's version outlives its
// object).
func Open(ctx context.Context, opts Options) (*Journal, []store.Restored, uint64, error) {
	if opts.Client == nil {
		return nil, nil, 0, errors.New("secretjournal: Options.Client is required")
	}
	if opts.FlushInterval <= 0 {
		opts.FlushInterval = DefaultFlushInterval
	}
	if opts.DeltaLimit <= 0 {
		opts.DeltaLimit = DefaultDeltaLimit
	}
	if opts.ChunkSize <= 0 {
		opts.ChunkSize = DefaultChunkSize
	}
	if opts.Log.GetSink() == nil {
		opts.Log = logr.Discard()
	}
	j := &Journal{
		opts:    opts,
		log:     opts.Log.WithValues("stateSecret", opts.Cluster.Namespace+"/"+HeadName(opts.Cluster.Name)),
		objects: map[key]live{},
		done:    make(chan struct{}),
		kick:    make(chan struct{}, 1),
		stop:    make(chan struct{}),
		stopped: make(chan struct{}),
	}
	if err := j.load(ctx); err != nil {
		return nil, nil, 0, err
	}
	restored := make([]store.Restored, 0, len(j.objects))
	for _, l := range j.objects {
		obj, err := journal.DecodeMeta(l.raw)
		if err != nil {
			return nil, nil, 0, fmt.Errorf("failed to decode %s %s/%s of the state of %s: %w", l.res.Resource, l.namespace, l.name, opts.Cluster, err)
		}
		restored = append(restored, store.Restored{Resource: l.res, Object: obj, Raw: l.raw})
	}
	go j.run()
	return j, restored, j.lastRV, nil
}

// load reads the head and its snapshot, or discards them.
func (j *Journal) load(ctx context.Context) error {
	head := &corev1.Secret{}
	err := j.opts.Client.Get(ctx, types.NamespacedName{Namespace: j.opts.Cluster.Namespace, Name: HeadName(j.opts.Cluster.Name)}, head)
	if apierrors.IsNotFound(err) {
		j.sweep = ptr.To(-1)
		return nil
	}
	if err != nil {
		return fmt.Errorf("failed to read the state of workload cluster %s: %w", j.opts.Cluster, err)
	}
	if !j.opts.Resume || !j.ownedByUs(head) {
		j.log.Info("Discarding the state of an earlier workload cluster of this name")
		return j.deleteAll(ctx)
	}
	j.head = head
	if j.generation, err = strconv.Atoi(string(head.Data[keyGeneration])); err != nil {
		return fmt.Errorf("the state of workload cluster %s names no snapshot generation: %w", j.opts.Cluster, err)
	}
	if j.chunks, err = strconv.Atoi(string(head.Data[keyChunks])); err != nil {
		return fmt.Errorf("the state of workload cluster %s has no chunk count: %w", j.opts.Cluster, err)
	}
	if j.lastRV, err = strconv.ParseUint(string(head.Data[keyRV]), 10, 64); err != nil {
		return fmt.Errorf("the state of workload cluster %s has no resourceVersion: %w", j.opts.Cluster, err)
	}
	var snapshot bytes.Buffer
	for i := range j.chunks {
		chunk := &corev1.Secret{}
		name := chunkName(j.opts.Cluster.Name, j.generation, i)
		if err := j.opts.Client.Get(ctx, types.NamespacedName{Namespace: j.opts.Cluster.Namespace, Name: name}, chunk); err != nil {
			return fmt.Errorf("failed to read snapshot chunk %s of workload cluster %s: %w", name, j.opts.Cluster, err)
		}
		snapshot.Write(chunk.Data[keySnapshot])
	}
	if j.chunks > 0 {
		zr, err := gzip.NewReader(&snapshot)
		if err != nil {
			return fmt.Errorf("the snapshot of workload cluster %s is corrupt: %w", j.opts.Cluster, err)
		}
		if err := j.replay(zr); err != nil {
			return fmt.Errorf("the snapshot of workload cluster %s is corrupt: %w", j.opts.Cluster, err)
		}
	}
	j.delta = head.Data[keyDelta]
	if err := j.replay(bytes.NewReader(j.delta)); err != nil {
		return fmt.Errorf("the delta of workload cluster %s is corrupt: %w", j.opts.Cluster, err)
	}
	j.sweep = ptr.To(j.generation)
	return nil
}

func (j *Journal) ownedByUs(head *corev1.Secret) bool {
	if j.opts.Owner.UID == "" {
		return true
	}
	for _, ref := range head.OwnerReferences {
		if ref.UID == j.opts.Owner.UID {
			return true
		}
	}
	return false
}

// replay applies the JSON lines of r to j.objects.
func (j *Journal) replay(r io.Reader) error {
	br := bufio.NewReaderSize(r, 64<<10)
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			rec, raw, decErr := journal.DecodeRecordRaw(line)
			if decErr != nil {
				return fmt.Errorf("line %d: %w", n, decErr)
			}
			j.apply(rec, raw)
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func (j *Journal) apply(rec journal.Record, raw []byte) {
	k := key{group: rec.Group, resource: rec.Resource, namespace: rec.Namespace, name: rec.Name}
	if rec.RV > j.lastRV {
		j.lastRV = rec.RV
	}
	if rec.Deleted {
		delete(j.objects, k)
		return
	}
	res := rec.StoreResource()
	j.objects[k] = live{res: res, namespace: rec.Namespace, name: rec.Name, raw: raw, rv: rec.RV}
}

// Put implements store.Journal.
func (j *Journal) Put(res store.Resource, obj *unstructured.Unstructured, raw []byte, rv uint64) {
	line, err := journal.EncodePut(res, obj.GetNamespace(), obj.GetName(), raw, rv)
	j.record(journal.PutRecord(res, obj, rv), raw, line, err)
}

// Delete implements store.Journal.
func (j *Journal) Delete(res store.Resource, namespace, name string, rv uint64) {
	rec := journal.DeleteRecord(res, namespace, name, rv)
	line, err := json.Marshal(rec)
	j.record(rec, nil, line, err)
}

// record queues the line of rec (raw: its object's JSON), or logs err.
func (j *Journal) record(rec journal.Record, raw, line []byte, err error) {
	if err != nil {
		j.log.Error(err, "Failed to encode a workload object for its state", "name", rec.Name)
		return
	}
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		return
	}
	j.apply(rec, raw)
	j.pending = append(append(j.pending, line...), '\n')
	j.seq++
	j.mu.Unlock()
	select {
	case j.kick <- struct{}{}:
	default:
	}
}

// Wait returns once every change recorded before it was called is in the
// management cluster, or the error that keeps it from getting there: the
// journal failed for good (ErrConflict), or ctx ended first.
func (j *Journal) Wait(ctx context.Context) error {
	j.mu.Lock()
	target := j.seq
	for {
		if j.persisted >= target {
			j.mu.Unlock()
			return nil
		}
		if j.failed != nil {
			err := j.failed
			j.mu.Unlock()
			return err
		}
		if j.closed {
			j.mu.Unlock()
			return fmt.Errorf("the state of workload cluster %s is closed", j.opts.Cluster)
		}
		done := j.done
		j.mu.Unlock()
		select {
		case <-done:
		case <-ctx.Done():
			return fmt.Errorf("the change is not yet kept in the management cluster: %w", ctx.Err())
		}
		j.mu.Lock()
	}
}

// broadcast wakes every Wait; j.mu is held.
func (j *Journal) broadcast() {
	close(j.done)
	j.done = make(chan struct{})
}

// run is the flusher: one write per FlushInterval at most, each with every
// change recorded since the last.
func (j *Journal) run() {
	defer close(j.stopped)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if j.sweep != nil {
		// Before any write: a compaction reuses the names of the
		// generation after the head's.
		if err := j.deleteChunksExcept(ctx, *j.sweep); err != nil {
			// A chunk left is overwritten by the compaction that names it
			// (putChunk); the next load tries again.
			j.log.Error(err, "Failed to delete the snapshot chunks an interrupted compaction left")
		}
	}
	for {
		select {
		case <-j.stop:
			j.final(ctx)
			return
		case <-j.kick:
		}
		start := time.Now()
		j.flush(ctx)
		if wait := j.opts.FlushInterval - time.Since(start); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-j.stop:
				t.Stop()
				j.final(ctx)
				return
			}
		}
	}
}

// final is the last flush of Close; Discard writes nothing.
func (j *Journal) final(ctx context.Context) {
	if j.discard {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, closeTimeout)
	defer cancel()
	j.flush(ctx)
}

// flush writes the pending changes: into the head's delta, or, when the
// delta would outgrow DeltaLimit, as a new snapshot.
func (j *Journal) flush(ctx context.Context) {
	j.mu.Lock()
	if len(j.pending) == 0 || j.failed != nil {
		j.mu.Unlock()
		return
	}
	pending, seq, rv := j.pending, j.seq, j.lastRV
	j.pending = nil
	compact := len(j.delta)+len(pending) > j.opts.DeltaLimit
	var snapshot []live
	if compact {
		snapshot = make([]live, 0, len(j.objects))
		for _, l := range j.objects {
			snapshot = append(snapshot, l)
		}
	}
	j.mu.Unlock()

	var err error
	var delta []byte
	if compact {
		err = j.writeSnapshot(ctx, snapshot, rv)
	} else {
		delta = append(slices.Clip(j.delta), pending...)
		err = j.writeHead(ctx, j.generation, j.chunks, delta, rv)
	}

	j.mu.Lock()
	defer j.mu.Unlock()
	switch {
	case err == nil:
		j.delta = delta
		j.persisted = seq
		j.broadcast()
	case errors.Is(err, ErrConflict):
		j.log.Error(err, "Stopped keeping the workload cluster's state")
		j.failed = err
		j.broadcast()
	default:
		// Tried again after FlushInterval, with what came since.
		j.log.Error(err, "Failed to keep the workload cluster's state; retrying")
		j.pending = append(pending, j.pending...)
		select {
		case j.kick <- struct{}{}:
		default:
		}
	}
}

// labels are every state Secret's.
func (j *Journal) meta(name string) metav1.ObjectMeta {
	m := metav1.ObjectMeta{
		Namespace: j.opts.Cluster.Namespace,
		Name:      name,
		Labels: map[string]string{
			LabelStateOf:               j.opts.Cluster.Name,
			clusterv1.ClusterNameLabel: j.opts.Cluster.Name,
		},
	}
	if j.opts.Owner.UID != "" {
		m.OwnerReferences = []metav1.OwnerReference{j.opts.Owner}
	}
	return m
}

// writeHead writes the head with its last resourceVersion as precondition
// (creates it the first time).
func (j *Journal) writeHead(ctx context.Context, generation, chunks int, delta []byte, rv uint64) error {
	s := &corev1.Secret{
		ObjectMeta: j.meta(HeadName(j.opts.Cluster.Name)),
		Type:       SecretType,
		Data: map[string][]byte{
			keyGeneration: []byte(strconv.Itoa(generation)),
			keyChunks:     []byte(strconv.Itoa(chunks)),
			keyDelta:      delta,
			keyRV:         []byte(strconv.FormatUint(rv, 10)),
		},
	}
	var err error
	if j.head == nil {
		err = j.opts.Client.Create(ctx, s)
		if apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("%w: its head Secret appeared", ErrConflict)
		}
	} else {
		s.ResourceVersion = j.head.ResourceVersion
		err = j.opts.Client.Update(ctx, s)
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return fmt.Errorf("%w: %v", ErrConflict, err)
		}
	}
	if err != nil {
		return fmt.Errorf("failed to write the state of workload cluster %s: %w", j.opts.Cluster, err)
	}
	j.head = s
	return nil
}

// writeSnapshot writes objects as the next generation's chunks, switches
// the head to it with an empty delta, and deletes the previous chunks.
func (j *Journal) writeSnapshot(ctx context.Context, objects []live, rv uint64) error {
	slices.SortFunc(objects, func(a, b live) int { return strings.Compare(sortKey(a), sortKey(b)) })
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	if err != nil {
		return err
	}
	for _, l := range objects {
		line, err := journal.EncodePut(l.res, l.namespace, l.name, l.raw, l.rv)
		if err != nil {
			return fmt.Errorf("failed to encode %s %s: %w", l.res.Resource, l.name, err)
		}
		_, _ = zw.Write(append(line, '\n'))
	}
	if err := zw.Close(); err != nil {
		return err
	}
	generation := j.generation + 1
	data := buf.Bytes()
	chunks := 0
	for len(data) > 0 {
		n := min(len(data), j.opts.ChunkSize)
		if err := j.putChunk(ctx, chunkName(j.opts.Cluster.Name, generation, chunks), data[:n]); err != nil {
			return err
		}
		data = data[n:]
		chunks++
	}
	if err := j.writeHead(ctx, generation, chunks, nil, rv); err != nil {
		return err
	}
	old, oldChunks := j.generation, j.chunks
	j.generation, j.chunks = generation, chunks
	for i := range oldChunks {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: j.opts.Cluster.Namespace, Name: chunkName(j.opts.Cluster.Name, old, i)}}
		if err := j.opts.Client.Delete(ctx, s); err != nil && !apierrors.IsNotFound(err) {
			// Deleted at the next load.
			j.log.Error(err, "Failed to delete an old snapshot chunk", "chunk", s.Name)
		}
	}
	return nil
}

func sortKey(l live) string {
	return l.res.Group + "/" + l.res.Resource + "/" + l.namespace + "/" + l.name
}

// putChunk creates a chunk, replacing one a killed compaction left.
func (j *Journal) putChunk(ctx context.Context, name string, data []byte) error {
	s := &corev1.Secret{ObjectMeta: j.meta(name), Type: SecretType, Data: map[string][]byte{keySnapshot: data}}
	err := j.opts.Client.Create(ctx, s)
	if apierrors.IsAlreadyExists(err) {
		existing := &corev1.Secret{}
		if err := j.opts.Client.Get(ctx, client.ObjectKeyFromObject(s), existing); err != nil {
			return fmt.Errorf("failed to read snapshot chunk %s: %w", name, err)
		}
		s.ResourceVersion = existing.ResourceVersion
		err = j.opts.Client.Update(ctx, s)
	}
	if err != nil {
		return fmt.Errorf("failed to write snapshot chunk %s: %w", name, err)
	}
	return nil
}

// stateSecrets lists the cluster's state Secrets.
func (j *Journal) stateSecrets(ctx context.Context) ([]corev1.Secret, error) {
	list := &corev1.SecretList{}
	if err := j.opts.Client.List(ctx, list, client.InNamespace(j.opts.Cluster.Namespace),
		client.MatchingLabels{LabelStateOf: j.opts.Cluster.Name}); err != nil {
		return nil, fmt.Errorf("failed to list the state Secrets of workload cluster %s: %w", j.opts.Cluster, err)
	}
	return list.Items, nil
}

// deleteChunksExcept deletes the cluster's chunk Secrets of every
// generation but keep.
func (j *Journal) deleteChunksExcept(ctx context.Context, keep int) error {
	secrets, err := j.stateSecrets(ctx)
	if err != nil {
		return err
	}
	prefix := HeadName(j.opts.Cluster.Name) + "-"
	keepPrefix := prefix + strconv.Itoa(keep) + "-"
	for i := range secrets {
		s := &secrets[i]
		if s.Type != SecretType || !strings.HasPrefix(s.Name, prefix) || strings.HasPrefix(s.Name, keepPrefix) {
			continue
		}
		if err := j.opts.Client.Delete(ctx, s); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("failed to delete stale snapshot chunk %s: %w", s.Name, err)
		}
	}
	return nil
}

// deleteAll deletes every state Secret of the cluster, head last.
func (j *Journal) deleteAll(ctx context.Context) error {
	if err := j.deleteChunksExcept(ctx, -1); err != nil {
		return err
	}
	head := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: j.opts.Cluster.Namespace, Name: HeadName(j.opts.Cluster.Name)}}
	if err := j.opts.Client.Delete(ctx, head); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("failed to delete the state of workload cluster %s: %w", j.opts.Cluster, err)
	}
	j.head, j.generation, j.chunks, j.delta, j.lastRV = nil, 0, 0, nil, 0
	j.objects = map[key]live{}
	return nil
}

// Close writes what is pending and stops; the Secrets stay, for the next
// start. Changes after Close are not recorded.
func (j *Journal) Close() error {
	if !j.shut(false) {
		return nil
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.failed != nil {
		return j.failed
	}
	if len(j.pending) > 0 {
		return fmt.Errorf("workload cluster %s: %d bytes of changes could not be kept", j.opts.Cluster, len(j.pending))
	}
	return nil
}

// Discard stops and deletes the cluster's state Secrets: the cluster is
// gone.
func (j *Journal) Discard() error {
	j.shut(true)
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	return j.deleteAll(ctx)
}

// shut stops the flusher once; it reports whether this call did.
func (j *Journal) shut(discard bool) bool {
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		return false
	}
	j.closed = true
	j.mu.Unlock()
	j.discard = discard
	close(j.stop)
	<-j.stopped
	j.mu.Lock()
	j.broadcast()
	j.mu.Unlock()
	return true
}

// Len is the number of live objects the journal describes.
func (j *Journal) Len() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.objects)
}

var _ store.Journal = (*Journal)(nil)
