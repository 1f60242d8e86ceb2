package capimanager

import (
	"bytes"
	"io"
	"strings"
	"sync"
)

// outputLines is how many of the process's last lines are kept for errors.
const outputLines = 200

// tailWriter keeps the last lines written to it and copies everything to out.
// It is the process's stdout and stderr, so it is written from exec's copying
// goroutine while Start and tests read it.
type tailWriter struct {
	mu      sync.Mutex
	out     io.Writer
	lines   []string
	partial []byte
}

func newTailWriter(out io.Writer) *tailWriter {
	return &tailWriter{out: out}
}

func (w *tailWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	// A failing Output must not stop the copy: the process would block on a
	// full pipe. Its error is dropped on purpose.
	_, _ = w.out.Write(p)

	w.partial = append(w.partial, p...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			break
		}
		w.lines = append(w.lines, string(w.partial[:i]))
		w.partial = w.partial[i+1:]
	}
	if extra := len(w.lines) - outputLines; extra > 0 {
		w.lines = append(w.lines[:0:0], w.lines[extra:]...)
	}
	return len(p), nil
}

// String returns the kept lines, the unfinished last one included.
func (w *tailWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := strings.Join(w.lines, "\n")
	if len(w.partial) > 0 {
		s += "\n" + string(w.partial)
	}
	return s
}
