// Package podbypod runs the clusterctl bundles as a management cluster runs
// them, pod by pod, on Docker (issue 29 item 3): etcd and kube-apiserver in
// a pod of their own on a user-defined Docker network, clusterctl's library
// installing Cluster API core, the kubeadm bootstrap and control plane
// providers (built into FROM scratch images from the pinned module's cached
// managers) and ours, and a small "kubelet" running every Deployment's pod
// template as containers: args with $(VAR) expanded, env with the downward
// API's values, the Secret, emptyDir and ServiceAccount token volumes, the
// user, read-only root and dropped capabilities, and a network alias per
// Service DNS name selecting the pod. The harness also plays cert-manager
// (it issues the Certificates' Secrets and injects their CA) and the
// EndpointSlice controller (webhook Services point at the pods' IPs, which
// kube-apiserver dials with --enable-aggregator-routing).
//
// Everything it creates carries the label LabelRun, is reachable only on
// loopback (kube-apiserver's published port) and the network's container
// IPs, and is removed when the test ends.
package podbypod
