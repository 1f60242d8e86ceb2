// Package memstat reads resident memory from /proc: a process's kernel
// high-water mark (VmHWM), which can be reset between runs, and its current
// size (VmRSS), sampled in the background; the same for another process by
// its pid (a provider binary or an apiserver the benchmark started); and the
// machine's MemAvailable, for a benchmark that must stop before the machine
// runs out of memory.
package memstat
