// Package kubeadmdata is small kubeadm bootstrap data: a cloud-config
// holding a kubeadm JoinConfiguration, as Cluster API's kubeadm bootstrap
// provider writes it for a worker. Tests that make inMemory machines
// without that provider put it in their bootstrap Secrets, so that each
// node registers as a kubeadm worker.
package kubeadmdata
