// Package webhooks validates the ipam module's pool kinds, MonolithIPPool and
// GlobalMonolithIPPool, before the apiserver stores them.
//
// One PoolValidator serves both kinds. It rejects a pool whose spec does not
// parse (every problem at once, as a 422 naming each field and entry), a
// pool whose addresses overlap another pool of ours (unless the pool carries
// the allow-overlap annotation, which turns the overlap into a warning), an
// update that would leave allocated IPAddresses outside the pool or change
// its address family, and the deletion of a pool that still has IPAddresses
// (unless it carries the skip-delete-protection annotation, meant for
// `clusterctl move`, which deletes the pools from the source cluster after
// copying them).
//
// The validator reads other pools, the pool's IPAddresses and its
// allocation records from the manager's cache; the lookups use
// index.IPAddressPoolField and index.AllocationPoolField, so index.Setup
// must run on the same manager. The webhook is a courtesy that answers
// early and clearly: two pools applied together both pass it, and it may be
// off, so the allocation records alone keep overlapping pools from handing
// out one address twice.
package webhooks
