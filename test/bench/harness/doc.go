// Package harness holds what every capi-monolith benchmark needs around the
// code it measures: one envtest apiserver with the module's CRDs, clients
// with stated rate limits, a description of the machine the figures come
// from, bounded parallel work, a watch that survives reconnects, and a
// timeline of when objects reached a state.
//
// A benchmark is a small program under test/bench/<name> (run by
// `make bench-<name>`, never by `make test`) with a smoke test that runs it
// at a tiny size. Memory figures come from package memstat, tables and
// run statistics from package report.
package harness
