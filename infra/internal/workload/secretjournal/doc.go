// Package secretjournal keeps one workload cluster's objects in Secrets of
// the management cluster, so that they survive the loss of the process
// serving them and of its pod's filesystem: another replica, or the pod
// started again elsewhere, reads them back (an installed provider's
// --inmemory-workload-state=secrets).
//
// A cluster's state is a snapshot and a delta. The head Secret
// (`<cluster>-workload-state`) holds the snapshot's generation and chunk
// count, the delta (JSON lines of the changes since the snapshot) and the
// last resourceVersion; the snapshot is a gzipped stream of JSON lines,
// one per live object, cut into chunk Secrets
// (`<cluster>-workload-state-<generation>-<i>`) under the 1 MiB Secret
// limit. Changes are group-committed: a flusher writes the head at most
// once per FlushInterval with every change made since its last write, and
// Wait returns once the changes made before it are written, so a workload
// write is acknowledged only once it is in the management cluster. When
// the delta outgrows DeltaLimit, a new snapshot generation is written, then
// the head switches to it in one write, then the old chunks are deleted: a
// process killed at any point leaves a head naming a complete snapshot.
//
// The head is written with its resourceVersion as a precondition: a
// conflict means another process writes the cluster's state, and this
// journal stops writing (its waiters fail) rather than overwrite it.
package secretjournal
