package hosting

import (
	"sync"
)

// storeLoad is one cluster's store being loaded from its journal: the
// callers that find it in flight wait for it rather than load it again.
type storeLoad struct {
	done chan struct{}
	err  error
}

// loadStore gives c its store, from its journal when resume (a cluster
// served again on its recorded endpoint), once this replica leads; a
// follower's cluster keeps forwarding. The journal is read without h.mu
// held, so that other clusters are served, loaded and looked up meanwhile.
func (h *Hosting) loadStore(c *Cluster, resume bool) error {
	h.mu.Lock()
	if !h.leading || c.Store() != nil || h.clusters[c.key] != c {
		h.mu.Unlock()
		return nil
	}
	if l := c.load; l != nil {
		h.mu.Unlock()
		<-l.done
		return l.err
	}
	l := &storeLoad{done: make(chan struct{})}
	c.load = l
	h.mu.Unlock()

	st, j, err := h.openStore(h.base, c.key, resume)

	h.mu.Lock()
	if err == nil {
		// The journal before the store: a connection is served once the
		// store is set (route), and its writes wait for the journal.
		c.journal = j
		c.setStore(st)
	}
	c.load = nil
	h.mu.Unlock()
	l.err = err
	close(l.done)
	if err == nil {
		h.opts.Log.Info("Serving the workload API", "cluster", c.key.String(), "endpoint", endpointString(c.endpoint))
	}
	return err
}

// forEach calls f with every item, workers at a time, and returns once
// every call has.
func forEach[T any](workers int, items []T, f func(T)) {
	work := make(chan T)
	var wg sync.WaitGroup
	for range min(workers, len(items)) {
		wg.Go(func() {
			for item := range work {
				f(item)
			}
		})
	}
	for _, item := range items {
		work <- item
	}
	close(work)
	wg.Wait()
}
