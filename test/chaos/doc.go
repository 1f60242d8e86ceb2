// Package chaos is the chaos suite: a real kube-apiserver and etcd, Cluster
// API's core, kubeadm bootstrap and kubeadm control plane managers as
// processes, and capi-monolith (infra with the inMemory and docker
// backends, machinepool, ipam and runtimeext) as a separate process, while
// clusters of the flavors users install are created, scaled and deleted
// under faults: the manager (which also serves every inMemory cluster's
// workload API) SIGKILLed at random points, kube-apiserver stopped and
// started again, the docker cluster's containers killed. Afterwards every
// cluster must have converged (control plane Available, Machines Running
// with their Nodes, the workload API back on its recorded endpoint), no
// address may be handed out twice, nothing of ours may be left after
// deletion (objects, finalizers, containers, networks), a paused cluster
// must not have been written to (resourceVersions, kube-apiserver's audit
// log), and the manager's goroutine count must be back to its baseline.
//
// Every run is one plan (flow_test.go) with its fault. The short run
// (short_test.go) is part of `go test ./...` (make test); the long runs
// (chaos_test.go, docker_test.go, badinput_test.go: issue 28's bad inputs
// between SIGKILLs) carry the chaos build tag and run with
// make test-chaos, for minutes.
package chaos
