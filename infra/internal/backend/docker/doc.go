// Package docker is the infra module's backend that runs clusters on a
// Docker Engine, the way kind and Cluster API's CAPD do: one container per
// machine, one haproxy container per cluster in front of the control plane,
// all on one user-defined network.
//
// # What it makes
//
//   - A network per MonolithCluster spec (default "kind", so kind clusters and
//     these share it), created when missing with an explicit subnet so that
//     static addresses from IP pools can be used on it. Networks the backend
//     created carry LabelCreatedBy; only those are ever removed, and only
//     when no container is attached any more.
//   - Per cluster a load-balancer container (v1alpha1.DockerLabelRole
//     "load-balancer") running haproxy (default image
//     DefaultLoadBalancerImage). Its configuration,
//     /usr/local/etc/haproxy/haproxy.cfg, is rendered by RenderHAProxyConfig
//     from the control-plane node containers found by label and their
//     current addresses, written with the archive API (the kindest/haproxy
//     image has no shell) and reloaded with SIGHUP (haproxy runs in
//     master-worker mode). It is re-rendered on every
//     ReconcileCluster and whenever a control-plane node is ensured or
//     deleted, so addresses that changed after a Docker restart are picked up.
//     A load balancer or node that stopped (`docker kill`, which Docker's
//     unless-stopped restart policy treats as a manual stop) is started
//     again by the next reconcile of its cluster or machine; a
//     control-plane machine's reconcile (machines are requeued, a steady
//     cluster is not) also starts a stopped load balancer.
//   - Per machine a node container (default image
//     kindest/node:<Machine version>), privileged and with the mounts kind
//     uses, with a static address when an IP pool gave one.
//
// Every container carries the labels v1alpha1 names for the docker backend
// (DockerLabelClusterNamespace, DockerLabelClusterName, DockerLabelRole; nodes
// also DockerLabelMachine). The backend finds what it made by those labels,
// never by a name or an object's status, so a restarted manager (or one
// after `clusterctl move`) adopts the containers it finds; Docker's unique
// container names make a second creation fail rather than duplicate a node.
// DeleteCluster removes every container with the cluster's labels, leftovers
// included.
//
// # One Engine, several management clusters
//
// Every container and network the backend creates also carries
// LabelManagementCluster with Options.ManagementCluster (the infra module
// sets it to the management cluster's kube-system namespace UID, or a
// flag), and every lookup (nodes, load balancer, adoption of a taken name,
// ListNodes, DeleteCluster and the networks it removes) is narrowed to it.
// Two management clusters on one Engine (two `dev` runs, or `dev` and the
// tests) with the same namespace and cluster names thus never see, adopt or
// delete each other's objects: when the plain container name is taken by
// the other's, the fallback name is hashed with the identity. A network is
// shared by name, as a user's network is; only the backend that created it
// removes it, once no container is attached.
//
// # The control-plane endpoint
//
// ReconcileCluster reports the load balancer container's address on the
// cluster's network, port 6443 (unless the spec asks for an endpoint, which
// is then reported as given). That address is the one both sides can use on
// Linux: the nodes reach it over the network, and the management cluster
// reaches it either from the Docker host (bridge networks are routed to the
// host) or from a kind cluster on the same network. The load balancer's
// address and host port are pinned when it is first created (static IP on
// the network, fixed host port), so a Docker restart changes neither; the
// endpoint must not change because Cluster API keeps it in the Cluster's
// spec and kubeadm puts it in certificates.
//
// The load balancer is also published on the Docker host, on
// spec.backend.docker.loadBalancerHostPort (0: Docker picks a free port
// once, which is then kept), bound to Options.LoadBalancerHostIP (default
// 127.0.0.1). Docker Desktop users, whose host cannot route to container
// addresses, reach the API server there (`docker port <lb> 6443`); the
// certificate does not name 127.0.0.1 unless the KubeadmControlPlane adds it
// to the API server's certSANs.
//
// # Bootstrap
//
// Bootstrap runs cloud-config bootstrap data (write_files, then runcmd) in
// the node through Docker exec; ignition is rejected. It is skipped when the
// Cluster API bootstrap sentinel /run/cluster-api/bootstrap-success.complete
// (or the copy the backend keeps under /var, which survives the tmpfs /run
// of a restarted node) exists.
package docker
