package main

import "github.com/capi-monolith/capi-monolith/dev"

// `capi-monolith dev`: a whole Cluster API management cluster from this
// binary (etcd, kube-apiserver, Cluster API core and every module).
func init() {
	subcommands["dev"] = dev.Command(registry())
	// A second Ctrl-C still cleans up: dev handles the signals.
	selfSignalled["dev"] = true
}
