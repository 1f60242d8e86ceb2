// Package podbypod runs the clusterctl bundles as a management cluster runs
// them, pod by pod, on Docker (issue 29 item 3): etcd and kube-apiserver in
// a pod of their own on a user-defined Docker network, clusterctl's library
// installing Cluster API core, the kubeadm bootstrap and control plane
// providers (built into FROM scratch images from the pinned module's cached
// managers) and ours, and a small "kubelet" running every Deployment's pod
// template as containers: args with $(VAR) expanded, env with the downward
// API's values, the Secret, emptyDir and ServiceAccount token volumes, the
// user, read-only root and dropped capabilities, and a network alias per
// headless Service DNS name selecting the pod. The harness also plays
// cert-manager (it issues the Certificates' Secrets and injects their CA),
// the EndpointSlice controller (webhook Services point at the pods' IPs,
// which kube-apiserver dials with --enable-aggregator-routing) and
// kube-proxy (a proxy container per Service with a cluster IP answers to
// the Service's DNS name and forwards each port to its target port on the
// pods: Cluster API core calls the runtime extension so). The
// kube-controller-manager runs on the host against the published port,
// with the garbage collector, namespace and ClusterRole aggregation
// controllers.
//
// A pod killed by the test is replaced at the test's next sync, as a
// ReplicaSet would; a container that exits is not restarted, and the
// test's checks of running containers report it with its last log lines.
//
// Everything it creates carries the label LabelRun, is reachable only on
// loopback (kube-apiserver's published port) and the network's container
// IPs, and is removed when the test ends.
package podbypod
