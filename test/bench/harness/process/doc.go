// Package process runs the capi-monolith binary as a separate process
// against a benchmark's envtest apiserver, exactly as an operator would run
// it (flags, kubeconfig, webhook certificates), and reads what an operator
// would read of it: its resident memory and CPU time from /proc, its metrics
// and pprof profiles from the secure diagnostics endpoint. Benchmarks that
// compare processes (one with every module against one per provider type) or
// that must not count their own feeding client use it; the others run the
// manager in-process.
package process
