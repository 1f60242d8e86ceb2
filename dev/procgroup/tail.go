package procgroup

import (
	"bytes"
	"io"
	"strings"
	"sync"
)

// tailLines is how many of a child's last lines a Tail keeps for errors.
const tailLines = 200

// Tail keeps the last lines written to it and copies everything to out.
// It is a child's stdout and stderr, so it is written from exec's copying
// goroutine while the code that started the child reads it.
type Tail struct {
	mu      sync.Mutex
	out     io.Writer
	lines   []string
	partial []byte
}

// NewTail returns a Tail copying to out.
func NewTail(out io.Writer) *Tail {
	return &Tail{out: out}
}

func (w *Tail) Write(p []byte) (int, error) {
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
	if extra := len(w.lines) - tailLines; extra > 0 {
		w.lines = append(w.lines[:0:0], w.lines[extra:]...)
	}
	return len(p), nil
}

// String returns the kept lines, the unfinished last one included.
func (w *Tail) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := strings.Join(w.lines, "\n")
	if len(w.partial) > 0 {
		s += "\n" + string(w.partial)
	}
	return s
}
