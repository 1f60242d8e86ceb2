// Package etcd is a fake etcd for one workload cluster: the etcd v3 gRPC
// answers Cluster API's KubeadmControlPlane asks of a kubeadm cluster's
// stacked etcd (member list, status, alarm list, member remove, move
// leader), served over TLS by a certificate the cluster's etcd CA signed,
// to clients whose certificate that CA signed.
//
// The members are derived from the cluster's store, so that a Server
// rebuilt after a restart answers as the one before: a member per Pod in
// kube-system labelled component=etcd (kubeadm's etcd-<node> static pods),
// named after the pod's node, with an ID hashed from that name and the
// pod's IP in its URLs. What the etcd RPCs change is recorded in the store
// too, as annotations on those pods: a removed member (AnnotationRemoved)
// leaves the member list while its pod stays, and the leader
// (AnnotationLeader) moves with MoveLeader.
//
// No TCP port is opened: Dial connects to the member of an etcd pod through
// an in-memory pipe, which is what the workload API server's
// pods/portforward hands a port-forward stream to.
package etcd
