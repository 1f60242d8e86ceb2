// Package lifecycle answers Cluster API's lifecycle hooks (BeforeClusterCreate
// ... BeforeClusterDelete) with three policies:
//
//   - hold: the Cluster annotation runtime.capi-monolith.dev/hold lists hooks
//     (comma-separated, e.g. "BeforeClusterUpgrade,BeforeClusterDelete")
//     that answer RetryAfterSeconds until the hook is removed from it: a
//     maintenance-window switch for operators. Only blocking hooks can be
//     held.
//   - IP capacity: BeforeClusterCreate waits while the topology asks more
//     addresses from one of the ipam module's pools (the monolithAddressPools
//     variable) than the pool has free, reading pools from the shared cache.
//   - record: every call is counted, timed and becomes an Event on the
//     Cluster (see package record).
//
// Everything else answers Success.
package lifecycle
