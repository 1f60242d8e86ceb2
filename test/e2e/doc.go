// Package e2e is the end-to-end suite of capi-monolith: it starts a
// `capi-monolith dev` environment (dev.Start, the command's own code path:
// etcd, kube-apiserver, Cluster API core as a child process, every module
// in-process), renders the cluster templates of kustomize/templates with
// clusterctl's own template processor, applies them and follows the
// clusters through provisioning, scaling, pause and deletion, with the
// inMemory backend and with the docker backend on the real Docker Engine.
package e2e
