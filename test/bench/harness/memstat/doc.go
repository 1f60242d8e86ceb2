// Package memstat reads the resident memory of the current process from
// /proc/self/status: the kernel's high-water mark (VmHWM), which can be reset
// between runs, and the current size (VmRSS), sampled in the background.
//
// Only the benchmark process is measured. The envtest kube-apiserver and
// etcd are separate processes and never counted.
package memstat
