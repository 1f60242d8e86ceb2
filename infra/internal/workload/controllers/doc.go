// Package controllers runs, inside every workload cluster's store, what
// kube-controller-manager, kube-scheduler and the kubelets of a real
// cluster do to make Pods run, as KWOK simulates them: the Deployment,
// ReplicaSet, ReplicationController, StatefulSet, DaemonSet, Job and CronJob
// controllers make Pods; the scheduler binds them to Nodes that fit; the
// kubelet moves them to Running and Ready (a Job's Pods to Succeeded) with a
// Pod IP from the Node's pod CIDR; node IPAM gives Nodes their pod CIDRs;
// Services get cluster IPs and Endpoints and EndpointSlices of their ready
// Pods; PersistentVolumeClaims are bound (provisioned by the default
// StorageClass when no volume matches); the Pods of a deleted Node are
// deleted.
//
// They act on the store directly, not over HTTP. One Manager serves every
// cluster of the process with a bounded pool of workers and one queue: a
// cluster costs no goroutine, and its work comes from the store's changes
// (store.Observe), never from relisting; a cluster holding only kubeadm's
// objects has next to nothing to do.
package controllers
