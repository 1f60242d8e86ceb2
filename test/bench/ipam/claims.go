package main

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/watch"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capi-monolith/capi-monolith/test/bench/harness"
)

// claimBatch is claims created as fast as the unthrottled feed goes and
// followed until each is fulfilled: the measured part of every run, ours
// alone and side by side.
type claimBatch struct {
	namespace string
	count     int
	// claim makes the i-th claim.
	claim func(i int) *ipamv1.IPAddressClaim
	// fulfilled says whether a claim seen by the watch counts as done.
	fulfilled func(*ipamv1.IPAddressClaim) bool
	// created, when set, is told once every create has returned.
	created func(time.Duration)
	// progress is told every progressInterval how many are done.
	progress func(done int, elapsed time.Duration)
}

// createAndFollow creates the batch and returns when each claim was first
// seen fulfilled, once all are. On an error after the creates (ctx ending
// among them) the timeline so far comes with it.
func (b *Bench) createAndFollow(ctx context.Context, batch claimBatch) (*harness.Timeline, error) {
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	start := time.Now()
	tl := harness.NewTimeline(start)
	watched := make(chan error, 1)
	go func() {
		watched <- harness.WatchEach(watchCtx, b.feed, &ipamv1.IPAddressClaimList{}, func(_ watch.EventType, obj client.Object) (bool, error) {
			c, ok := obj.(*ipamv1.IPAddressClaim)
			if !ok {
				return false, fmt.Errorf("watch of IPAddressClaims sent %T", obj)
			}
			if batch.fulfilled(c) {
				tl.Mark(c.Name, time.Now())
			}
			return tl.Len() >= batch.count, nil
		}, client.InNamespace(batch.namespace))
	}()

	err := harness.ForEach(ctx, batch.count, b.cfg.CreateWorkers, func(ctx context.Context, i int) error {
		c := batch.claim(i)
		if err := b.feed.Create(ctx, c); err != nil {
			return fmt.Errorf("failed to create IPAddressClaim %s: %w", c.Name, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if batch.created != nil {
		batch.created(time.Since(start))
	}

	tick := time.NewTicker(progressInterval)
	defer tick.Stop()
	for {
		select {
		case err := <-watched:
			if err != nil {
				return tl, fmt.Errorf("failed to follow the claims (%d of %d fulfilled): %w", tl.Len(), batch.count, err)
			}
			return tl, nil
		case <-tick.C:
			batch.progress(tl.Len(), time.Since(start).Round(time.Second))
		}
	}
}
