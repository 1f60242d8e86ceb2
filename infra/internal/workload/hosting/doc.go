// Package hosting serves the workload Kubernetes API of every inMemory
// cluster of the process: one TCP listener per cluster on the configured
// address and port range (the cluster's control plane endpoint), TLS with a
// serving certificate signed by the cluster's `<cluster>-ca` Secret and
// client certificates verified against it, and one in-memory store per
// cluster behind the shared apiserver handler.
//
// One port per cluster, not one listener told apart by SNI: Cluster API
// writes the endpoint's host into the kubeconfig, Go clients send no server
// name when that host is an IP address, and a port tells the cluster apart
// before any byte of the handshake.
//
// The endpoint's host is the advertised host (a headless Service's DNS
// name when installed) or the listen address. The MonolithCluster records
// the endpoint: a restarted process binds the recorded port again. The
// workload objects survive a restart in the cluster's Journal (a file, or
// Secrets of the management cluster); a write through the workload API is
// answered once its journal keeps it. With Leadership, several replicas
// listen on every endpoint and the followers forward to the leader.
package hosting
