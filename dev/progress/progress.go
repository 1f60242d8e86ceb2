// Package progress shows what the dev environment is starting and how long
// each step took, one line per step, on a terminal or a log.
package progress

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// Display writes progress lines to an io.Writer. The zero value, and a
// Display with a nil writer, print nothing (--quiet).
type Display struct {
	mu    sync.Mutex
	out   io.Writer
	start time.Time
	now   func() time.Time
}

// New returns a Display writing to out; nil means quiet.
func New(out io.Writer) *Display {
	return &Display{out: out, start: time.Now(), now: time.Now}
}

// Step prints that name is starting and returns the function that ends the
// step: it prints the step's duration, or its error.
func (d *Display) Step(name string) (done func(err error)) {
	d.printf("  • %s ...\n", name)
	began := d.clock()
	var once sync.Once
	return func(err error) {
		once.Do(func() {
			took := d.clock().Sub(began).Round(10 * time.Millisecond)
			if err != nil {
				d.printf("  ✗ %s failed after %s: %v\n", name, took, err)
				return
			}
			d.printf("  ✓ %s (%s)\n", name, took)
		})
	}
}

// Elapsed is the time since New.
func (d *Display) Elapsed() time.Duration {
	if d == nil || d.now == nil {
		return 0
	}
	return d.clock().Sub(d.start)
}

// Printf prints a free-form line.
func (d *Display) Printf(format string, args ...any) { d.printf(format, args...) }

func (d *Display) clock() time.Time {
	if d == nil || d.now == nil {
		return time.Now()
	}
	return d.now()
}

func (d *Display) printf(format string, args ...any) {
	if d == nil || d.out == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	_, _ = fmt.Fprintf(d.out, format, args...)
}
