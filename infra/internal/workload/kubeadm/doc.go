// Package kubeadm mimics, in a workload cluster's store, what kubeadm init,
// kubeadm join and the kubelet would have put into a real cluster, so that
// Cluster API's controllers (core's Machine controller, KubeadmControlPlane
// and the kubeadm bootstrap provider) find what they read there: a Node per
// machine with its provider ID, addresses, Ready condition and kubelet
// version; on control-plane nodes the kubeadm labels and taint and the
// static Pods (kube-apiserver, kube-controller-manager, kube-scheduler and
// etcd, Running and Ready); and once per cluster the kubeadm-config
// ConfigMap whose presence tells KubeadmControlPlane the control plane is
// initialized, kubelet-config, CoreDNS, kube-proxy, kube-public/cluster-info
// and the RBAC kubeadm creates.
//
// Ensure only creates what is missing, never changes what exists (a
// person's kubectl edit of a Node condition or a controller's update of
// kubeadm-config persists), so it can be called on every reconcile and to
// rebuild a store after a restart. Remove deletes a node's objects.
//
// Parse and Recognize read bootstrap data as the kubeadm bootstrap provider
// (CABPK) writes it, cloud-config or Ignition, and tell kubeadm init, a
// control-plane join and a worker join apart, with the kubeadm
// configuration they carry (node registration, ClusterConfiguration).
package kubeadm
