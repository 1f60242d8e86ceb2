// Package chaos is the chaos suite (make test-chaos): a real kube-apiserver
// and etcd, Cluster API core as a process, and capi-monolith (infra with the
// inMemory backend, machinepool and ipam) as a separate process that the
// suite SIGKILLs at random points while it creates, scales and deletes
// clusters from the flavors users install. Afterwards every cluster must
// have converged, no address may be handed out twice, nothing of ours may be
// left after deletion, and a paused cluster's objects must be unchanged.
//
// Every file carries the chaos build tag, so `go test ./...` (make test)
// does not compile the suite: it runs only when asked for, for minutes.
package chaos
