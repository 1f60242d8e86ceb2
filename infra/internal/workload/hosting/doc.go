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
// Nothing here survives a restart but the endpoint, which the MonolithCluster
// records: a restarted process binds the recorded port again and the
// workload objects are made anew from the Cluster API objects (the
// inMemory backend registers every bootstrapped machine's node again).
package hosting
