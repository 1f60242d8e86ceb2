package docker

import (
	"context"
	"fmt"

	"github.com/moby/moby/client"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/infra/internal/backend"
)

// ReconcileCluster makes the cluster's network and load balancer exist,
// brings the load balancer configuration up to date with the control-plane
// nodes, and reports the endpoint (see the package documentation).
func (b *Backend) ReconcileCluster(ctx context.Context, spec backend.ClusterSpec) (backend.ClusterStatus, error) {
	if spec.Backend.Docker == nil {
		return backend.ClusterStatus{}, fmt.Errorf("cluster %s/%s has no docker backend", spec.Cluster.Namespace, spec.Cluster.Name)
	}
	networkName := valueOr(spec.Backend.Docker.Network, b.network)
	n, err := b.ensureNetwork(ctx, networkName, spec.Cluster)
	if err != nil {
		return backend.ClusterStatus{}, err
	}
	lb, err := b.ensureLoadBalancer(ctx, spec, n)
	if err != nil {
		return backend.ClusterStatus{}, err
	}
	if err := b.refreshLoadBalancer(ctx, spec.Cluster); err != nil {
		return backend.ClusterStatus{}, err
	}

	if spec.Endpoint.Host != "" {
		endpoint := spec.Endpoint
		if endpoint.Port == 0 {
			endpoint.Port = APIServerPort
		}
		return backend.ClusterStatus{Endpoint: endpoint}, nil
	}
	addr := addressOn(lb, lb.Config.Labels[LabelNetwork])
	if !addr.IsValid() {
		return backend.ClusterStatus{}, fmt.Errorf("load balancer %s has no address on network %s", containerNameOf(lb), n.Name)
	}
	return backend.ClusterStatus{Endpoint: clusterv1.APIEndpoint{Host: addr.String(), Port: APIServerPort}}, nil
}

// LoadBalancerHostPort returns the port of the Docker host the cluster's
// load balancer is published on, 0 when it has none (yet).
func (b *Backend) LoadBalancerHostPort(ctx context.Context, cluster backend.ClusterRef) (int, error) {
	lb, found, err := b.findLoadBalancer(ctx, cluster)
	if err != nil || !found || lb.NetworkSettings == nil {
		return 0, err
	}
	for _, binding := range lb.NetworkSettings.Ports[apiServerPort] {
		var port int
		if _, err := fmt.Sscan(binding.HostPort, &port); err == nil && port > 0 {
			return port, nil
		}
	}
	return 0, nil
}

// ListNodes implements backend.Cluster: the node containers labelled with
// the cluster, whatever state they are in.
func (b *Backend) ListNodes(ctx context.Context, cluster backend.ClusterRef) ([]backend.MachineRef, error) {
	items, err := b.listContainers(ctx, b.clusterLabels(cluster))
	if err != nil {
		return nil, err
	}
	var nodes []backend.MachineRef
	for _, item := range items {
		if name := item.Labels[v1alpha1.DockerLabelMachine]; name != "" && item.Labels[v1alpha1.DockerLabelRole] != v1alpha1.DockerRoleLoadBalancer {
			nodes = append(nodes, backend.MachineRef{Cluster: cluster, Name: name})
		}
	}
	return nodes, nil
}

// DeleteCluster removes every container labelled with the cluster (load
// balancer, nodes, leftovers of earlier runs), then the networks they were
// on that the backend created and that are now empty.
func (b *Backend) DeleteCluster(ctx context.Context, cluster backend.ClusterRef) error {
	log := ctrl.LoggerFrom(ctx)
	items, err := b.listContainers(ctx, b.clusterLabels(cluster))
	if err != nil {
		return err
	}
	networks := map[string]bool{}
	for _, item := range items {
		if item.NetworkSettings != nil {
			for _, ep := range item.NetworkSettings.Networks {
				if ep != nil && ep.NetworkID != "" {
					networks[ep.NetworkID] = true
				}
			}
		}
		log.Info("Deleting container", "container", item.Names, "role", item.Labels[v1alpha1.DockerLabelRole])
		if err := b.removeContainer(ctx, item.ID); err != nil {
			return err
		}
	}
	// Networks this cluster created are removed too when empty, also when
	// an earlier DeleteCluster removed the containers and then failed.
	own := b.clusterLabels(cluster)
	own[LabelCreatedBy] = CreatedByValue
	created, err := b.client.NetworkList(ctx, client.NetworkListOptions{Filters: labelFilters(own)})
	if err != nil {
		return fmt.Errorf("failed to list networks: %w", err)
	}
	for _, n := range created.Items {
		networks[n.ID] = true
	}
	for id := range networks {
		if err := b.removeNetworkIfUnused(ctx, id); err != nil {
			return err
		}
	}
	return nil
}
