// Package envtest holds nothing but the build of the envtest binaries
// (kube-apiserver and etcd) from the Go module proxy; see the Makefile target
// envtest-assets.
package envtest
