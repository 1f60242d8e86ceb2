// Package workload is the root of the workload Kubernetes API that every
// inMemory cluster answers: store holds a cluster's objects; apiserver
// serves them over HTTP with Kubernetes semantics, its TLS helper
// authenticating clients by the cluster CA; etcd answers the etcd v3 gRPC
// KubeadmControlPlane asks for, reached through apiserver's
// pods/portforward; kubeadm registers a node as kubeadm and the kubelet
// would; journal keeps a cluster's objects in a file across restarts,
// secretjournal in Secrets of the management cluster;
// hosting serves one listener per cluster. The inMemory backend
// (infra/internal/backend/inmemory) enters it through hosting and kubeadm;
// see docs/workload-api.md.
package workload
