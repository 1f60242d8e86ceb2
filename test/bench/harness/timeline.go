package harness

import (
	"sync"
	"time"
)

// Timeline records, in order, the first time each object reached a state
// (a claim fulfilled, a machine provisioned), counted from a start.
type Timeline struct {
	mu    sync.Mutex
	start time.Time
	seen  map[string]struct{}
	times []time.Time
}

// NewTimeline returns an empty timeline counting from start.
func NewTimeline(start time.Time) *Timeline {
	return &Timeline{start: start, seen: map[string]struct{}{}}
}

// Mark records key at time at unless it was marked before, and reports
// whether it was new.
func (t *Timeline) Mark(key string, at time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.seen[key]; ok {
		return false
	}
	t.seen[key] = struct{}{}
	t.times = append(t.times, at)
	return true
}

// Len returns the number of objects marked.
func (t *Timeline) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.times)
}

// Elapsed returns the time from the start to the k-th mark (1-based); the
// 0-th mark is the start itself. k is clamped to [0, Len()].
func (t *Timeline) Elapsed(k int) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	k = max(0, min(k, len(t.times)))
	if k == 0 {
		return 0
	}
	return t.times[k-1].Sub(t.start)
}

// Window returns the time from the (k-size)-th to the k-th mark.
func (t *Timeline) Window(k, size int) time.Duration {
	return t.Elapsed(k) - t.Elapsed(k-size)
}

// Rate returns marks per second from the start to the last mark.
func (t *Timeline) Rate() float64 {
	n := t.Len()
	d := t.Elapsed(n)
	if n == 0 || d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}
