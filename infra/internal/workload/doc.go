// Package workload is the root of the workload Kubernetes API that every
// inMemory cluster will answer (issue 18): store holds a cluster's objects;
// apiserver serves them over HTTP with Kubernetes semantics, its TLS helper
// authenticating clients by the cluster CA; etcd answers the etcd v3 gRPC
// KubeadmControlPlane asks for, reached through apiserver's
// pods/portforward. Nothing here is wired into the inMemory backend yet;
// see docs/workload-api.md.
package workload
