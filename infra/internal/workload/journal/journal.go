// Package journal keeps one workload cluster's objects in a file, so that
// what users and Cluster API wrote through its workload API outlives the
// process serving it (Ctrl-C or SIGKILL of `capi-monolith dev --data-dir`,
// a restarted manager).
//
// The file is a journal of JSON lines, one per change, each written with
// one write(2) as the store makes the change: a killed process loses
// nothing the kernel has been handed, and a line torn by a crash mid-write
// is the last one and is ignored when the file is read. When the journal
// has grown past twice the size of the objects it describes (and
// CompactAfter), it is rewritten as one line per live object, to a
// temporary file renamed over it, so that it stays proportional to the
// cluster, not to its history.
package journal

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
)

// DefaultCompactAfter is the journal size below which it is never
// compacted.
const DefaultCompactAfter = 4 << 20

// maxLine bounds one line read back: the workload API refuses objects
// larger than its request body limit, far below it.
const maxLine = 64 << 20

// Options configure a Journal.
type Options struct {
	// Path is the journal's file; its folder is made (0700) if missing.
	Path string
	// CompactAfter is the size below which the file is never rewritten.
	// Default DefaultCompactAfter.
	CompactAfter int64
	// Log receives write failures, which cannot fail the store's change
	// they follow.
	Log logr.Logger
}

type key struct {
	group, resource, namespace, name string
}

// live is an object the journal describes, as its JSON (shared with the
// store, which keeps the same encoding), and the size of its line.
type live struct {
	res  store.Resource
	raw  []byte
	rv   uint64
	size int64
}

// Journal is one cluster's journal file. It implements store.Journal; it
// is safe for concurrent use.
type Journal struct {
	opts Options

	mu      sync.Mutex
	f       *os.File
	size    int64 // bytes in the file
	objects map[key]live
	liveLen int64 // bytes the live objects' lines take
	failed  bool  // a write failed: logged once, then retried on every change
}

// Open reads the journal at opts.Path (none yet is an empty cluster) and
// opens it for the changes to come. It returns the objects it holds, for
// store.Options.Restored.
func Open(opts Options) (*Journal, []store.Restored, error) {
	if opts.CompactAfter <= 0 {
		opts.CompactAfter = DefaultCompactAfter
	}
	if opts.Log.GetSink() == nil {
		opts.Log = logr.Discard()
	}
	if err := os.MkdirAll(filepath.Dir(opts.Path), 0o700); err != nil {
		return nil, nil, fmt.Errorf("failed to create the folder of journal %s: %w", opts.Path, err)
	}
	j := &Journal{opts: opts, objects: map[key]live{}}
	torn, err := j.read()
	if err != nil {
		return nil, nil, err
	}
	// Start from a compact file: the history before this start is no use,
	// and a torn last line must not have the next change appended to it.
	// A journal closed cleanly is compact already and is only reopened.
	if torn || j.size != j.liveLen {
		err = j.rewrite()
	} else {
		err = j.reopen()
	}
	if err != nil {
		return nil, nil, err
	}
	restored := make([]store.Restored, 0, len(j.objects))
	for k, l := range j.objects {
		obj, err := DecodeMeta(l.raw)
		if err != nil {
			return nil, nil, fmt.Errorf("journal %s: %s %s: %w", opts.Path, l.res.Resource, k.name, err)
		}
		restored = append(restored, store.Restored{Resource: l.res, Object: obj, Raw: l.raw})
	}
	return j, restored, nil
}

// read replays the file into j.objects, counting its bytes in j.size. It
// says whether the last line was torn.
func (j *Journal) read() (torn bool, err error) {
	f, err := os.Open(j.opts.Path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("failed to open journal %s: %w", j.opts.Path, err)
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 64<<10)
	var buf bytes.Buffer
	for n := 1; ; n++ {
		line, err := readLine(r, &buf)
		if errors.Is(err, io.EOF) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("failed to read journal %s at line %d: %w", j.opts.Path, n, err)
		}
		rec, raw, err := DecodeRecordRaw(line)
		if err != nil || line[len(line)-1] != '\n' {
			// Only the last line can be torn (a crash mid-write); a bad
			// line with more after it is corruption.
			if _, peekErr := r.Peek(1); errors.Is(peekErr, io.EOF) {
				j.opts.Log.Info("Ignoring the torn last line of a workload journal", "journal", j.opts.Path, "line", n)
				return true, nil
			}
			return false, fmt.Errorf("journal %s is corrupt at line %d: %v", j.opts.Path, n, err)
		}
		j.apply(rec, raw, int64(len(line)))
		j.size += int64(len(line))
	}
}

// readLine reads one line into buf, newline included (missing on a torn
// last line), refusing lines over maxLine. The line is valid until the
// next call.
func readLine(r *bufio.Reader, buf *bytes.Buffer) ([]byte, error) {
	buf.Reset()
	for {
		chunk, err := r.ReadSlice('\n')
		buf.Write(chunk)
		if buf.Len() > maxLine {
			return nil, fmt.Errorf("a line is longer than %d bytes", maxLine)
		}
		switch {
		case err == nil:
			return buf.Bytes(), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && buf.Len() > 0:
			return buf.Bytes(), nil
		default:
			return nil, err
		}
	}
}

func (j *Journal) apply(rec Record, raw []byte, size int64) {
	k := key{group: rec.Group, resource: rec.Resource, namespace: rec.Namespace, name: rec.Name}
	if old, ok := j.objects[k]; ok {
		j.liveLen -= old.size
		delete(j.objects, k)
	}
	if rec.Deleted {
		return
	}
	res := rec.StoreResource()
	j.objects[k] = live{res: res, raw: raw, rv: rec.RV, size: size}
	j.liveLen += size
}

// Put implements store.Journal.
func (j *Journal) Put(res store.Resource, obj *unstructured.Unstructured, raw []byte, rv uint64) {
	line, err := EncodePut(res, obj.GetNamespace(), obj.GetName(), raw, rv)
	j.append(PutRecord(res, obj, rv), raw, line, err)
}

// Delete implements store.Journal.
func (j *Journal) Delete(res store.Resource, namespace, name string, rv uint64) {
	rec := DeleteRecord(res, namespace, name, rv)
	line, err := json.Marshal(rec)
	j.append(rec, nil, line, err)
}

// append writes the line of rec (raw: its object's JSON), or logs err.
func (j *Journal) append(rec Record, raw, line []byte, err error) {
	if err != nil {
		j.opts.Log.Error(err, "Failed to encode a workload object for its journal", "journal", j.opts.Path, "name", rec.Name)
		return
	}
	line = append(line, '\n')
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil {
		return
	}
	if rec.Deleted {
		j.apply(rec, nil, 0)
	} else {
		j.apply(rec, raw, int64(len(line)))
	}
	if _, err := j.f.Write(line); err != nil {
		if !j.failed {
			j.opts.Log.Error(err, "Failed to write a workload cluster's journal: changes may not survive a restart", "journal", j.opts.Path)
		}
		j.failed = true
		return
	}
	j.failed = false
	j.size += int64(len(line))
	if j.size > j.opts.CompactAfter && j.size > 2*j.liveLen {
		if err := j.rewrite(); err != nil {
			j.opts.Log.Error(err, "Failed to compact a workload cluster's journal", "journal", j.opts.Path)
		}
	}
}

// rewrite replaces the file with one line per live object and reopens it
// for appending; j.mu is held (or j is not shared yet).
func (j *Journal) rewrite() error {
	tmp := j.opts.Path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("failed to create %s: %w", tmp, err)
	}
	w := bufio.NewWriterSize(f, 256<<10)
	var size int64
	for k, l := range j.objects {
		line, err := EncodePut(l.res, k.namespace, k.name, l.raw, l.rv)
		if err != nil {
			_ = f.Close()
			return fmt.Errorf("failed to encode %s %s for journal %s: %w", l.res.Resource, k.name, j.opts.Path, err)
		}
		line = append(line, '\n')
		if _, err := w.Write(line); err != nil {
			_ = f.Close()
			return fmt.Errorf("failed to write %s: %w", tmp, err)
		}
		l.size = int64(len(line))
		j.objects[k] = l
		size += l.size
	}
	if err := errors.Join(w.Flush(), f.Sync(), f.Close()); err != nil {
		return fmt.Errorf("failed to write %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, j.opts.Path); err != nil {
		return fmt.Errorf("failed to replace journal %s: %w", j.opts.Path, err)
	}
	j.size, j.liveLen = size, size
	return j.reopen()
}

// reopen (re)opens the file for appending; j.mu is held (or j is not
// shared yet).
func (j *Journal) reopen() error {
	if j.f != nil {
		_ = j.f.Close()
	}
	var err error
	if j.f, err = os.OpenFile(j.opts.Path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600); err != nil {
		j.f = nil
		return fmt.Errorf("failed to reopen journal %s: %w", j.opts.Path, err)
	}
	return nil
}

// Close compacts the journal and closes it; the file stays, for the next
// start. Changes after Close are not recorded.
func (j *Journal) Close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil {
		return nil
	}
	err := j.rewrite()
	if j.f != nil {
		err = errors.Join(err, j.f.Close())
	}
	j.f = nil
	return err
}

// Discard closes the journal and removes its file: the cluster is gone.
func (j *Journal) Discard() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f != nil {
		_ = j.f.Close()
		j.f = nil
	}
	if err := os.Remove(j.opts.Path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("failed to remove journal %s: %w", j.opts.Path, err)
	}
	return nil
}

// Path is where the journal of cluster namespace/name lives under dir.
func Path(dir, namespace, name string) string {
	return filepath.Join(dir, namespace, name+".journal")
}

// Len is the number of live objects the journal describes.
func (j *Journal) Len() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.objects)
}

var _ store.Journal = (*Journal)(nil)
