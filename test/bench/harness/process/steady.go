package process

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"
)

// refusedFor bounds how long WaitSteady waits for a diagnostics listener
// that refuses connections: /readyz, which Start waits for, is served by
// another listener, and on a loaded machine the diagnostics one was seen
// to open after it.
const refusedFor = 30 * time.Second

// WaitSteady waits until, for steadyScrapes scrapes a second apart, no
// process has work queued and neither the reconciles done nor the watches
// open have changed: the initial sync and every reconcile it caused are over.
// The watches matter because a controller starts reconciling only once its
// informers have listed and are watching.
func WaitSteady(ctx context.Context, procs []*Process, timeout time.Duration) error {
	const steadyScrapes = 5
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	type reading struct{ reconciles, watches float64 }
	var last reading
	start := time.Now()
	for still := -1; still < steadyScrapes; {
		select {
		case <-ctx.Done():
			return fmt.Errorf("processes not steady within %s (last reading: %+v)", timeout, last)
		case <-time.After(time.Second):
		}
		var now reading
		var depth float64
		for _, p := range procs {
			m, err := p.Metrics(ctx)
			if errors.Is(err, syscall.ECONNREFUSED) && time.Since(start) < refusedFor {
				still = -1
				continue
			}
			if err != nil {
				return fmt.Errorf("%w; the process's log:\n%s", err, p.Log())
			}
			now.reconciles += m.Sum("controller_runtime_reconcile_total")
			now.watches += m.Sum("capi_monolith_api_watches_open")
			depth += m.Sum("workqueue_depth")
		}
		if depth == 0 && now == last && still >= 0 {
			still++
		} else {
			still = 0
		}
		last = now
	}
	return nil
}
