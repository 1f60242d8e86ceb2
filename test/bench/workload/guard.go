package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/capi-monolith/capi-monolith/test/bench/harness/memstat"
)

// errLowMemory is the cause a run's context is cancelled with when the
// machine's MemAvailable fell below -min-available: a run that would push
// the machine into the OOM killer ends with the figures of that moment.
var errLowMemory = errors.New("the machine is running out of memory")

// memoryGuard reads MemAvailable once a second while the clusters come up,
// keeps the lowest reading and cancels the run when it falls below min.
type memoryGuard struct {
	min  uint64
	stop context.CancelFunc
	done chan struct{}

	mu        sync.Mutex
	lowest    uint64
	trippedAt time.Time
	err       error
}

// startMemoryGuard returns a context that is cancelled with errLowMemory
// when MemAvailable falls below min (0 only records the lowest reading).
func startMemoryGuard(parent context.Context, min uint64) (context.Context, *memoryGuard) {
	ctx, cancel := context.WithCancelCause(parent)
	loop, stop := context.WithCancel(ctx)
	g := &memoryGuard{min: min, stop: stop, done: make(chan struct{})}
	g.read(cancel)
	go func() {
		defer close(g.done)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-loop.Done():
				return
			case <-t.C:
				g.read(cancel)
			}
		}
	}()
	return ctx, g
}

func (g *memoryGuard) read(cancel context.CancelCauseFunc) {
	avail, err := memstat.Available()
	g.mu.Lock()
	defer g.mu.Unlock()
	if err != nil {
		if g.err == nil {
			g.err = err
		}
		return
	}
	if g.lowest == 0 || avail < g.lowest {
		g.lowest = avail
	}
	if g.min > 0 && avail < g.min && g.trippedAt.IsZero() {
		g.trippedAt = time.Now()
		cancel(fmt.Errorf("%w: MemAvailable %s MiB, below -min-available %s MiB", errLowMemory, memstat.MiB(avail), memstat.MiB(g.min)))
	}
}

// Stop ends the readings; the lowest one stays readable.
func (g *memoryGuard) Stop() {
	g.stop()
	<-g.done
}

// Lowest is the lowest MemAvailable seen, and the first read error if a
// reading failed.
func (g *memoryGuard) Lowest() (uint64, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.lowest, g.err
}

// Tripped says whether the guard ended the run.
func (g *memoryGuard) Tripped() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return !g.trippedAt.IsZero()
}

// availableMiB is MemAvailable now, for the progress lines.
func availableMiB() string {
	b, err := memstat.Available()
	if err != nil {
		return "unknown"
	}
	return memstat.MiB(b) + " MiB"
}
