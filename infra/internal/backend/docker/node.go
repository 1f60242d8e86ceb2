package docker

import (
	"context"
	"fmt"
	"net/netip"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/infra/internal/backend"
)

// nodeLabels are the labels that find a machine's node container.
func (b *Backend) nodeLabels(machine backend.MachineRef) map[string]string {
	l := b.clusterLabels(machine.Cluster)
	l[v1alpha1.DockerLabelMachine] = machine.Name
	return l
}

func nodeName(machine backend.MachineRef) []string {
	return []string{machine.Cluster.Namespace, machine.Cluster.Name, machine.Name}
}

// findNode returns the machine's node container, found=false when there is
// none. Were there two (nothing this backend does makes two), the oldest is
// the node.
func (b *Backend) findNode(ctx context.Context, machine backend.MachineRef) (container.InspectResponse, bool, error) {
	items, err := b.listContainers(ctx, b.nodeLabels(machine))
	if err != nil {
		return container.InspectResponse{}, false, err
	}
	for _, item := range items {
		c, err := b.inspect(ctx, item.ID)
		if err != nil {
			if cerrdefs.IsNotFound(err) {
				continue
			}
			return container.InspectResponse{}, false, err
		}
		return c, true, nil
	}
	return container.InspectResponse{}, false, nil
}

// EnsureNode makes the machine's node container exist and run, adopting the
// one it finds by label, and returns it. It is provisioned once it runs and
// has its address on the cluster's network. A control-plane node also
// refreshes the cluster's load balancer configuration.
func (b *Backend) EnsureNode(ctx context.Context, spec backend.NodeSpec) (backend.Node, error) {
	if spec.Backend.Docker == nil {
		return backend.Node{}, fmt.Errorf("machine %s/%s has no docker backend", spec.Machine.Cluster.Namespace, spec.Machine.Name)
	}
	node, err := b.ensureNode(ctx, spec)
	if err != nil {
		return backend.Node{}, err
	}
	if spec.ControlPlane {
		if err := b.refreshLoadBalancer(ctx, spec.Machine.Cluster); err != nil {
			return node, err
		}
	}
	return node, nil
}

func (b *Backend) ensureNode(ctx context.Context, spec backend.NodeSpec) (backend.Node, error) {
	m := spec.Machine
	defer b.lock("node/" + m.Cluster.Namespace + "/" + m.Cluster.Name + "/" + m.Name)()

	c, found, err := b.findNode(ctx, m)
	if err != nil {
		return backend.Node{}, err
	}
	if !found {
		c, err = b.createNode(ctx, spec)
	} else {
		// A node created by a call that failed before connecting it.
		c, err = b.ensureFailureDomainNetwork(ctx, c, spec)
	}
	if err != nil {
		return backend.Node{}, err
	}
	if c.State == nil || !c.State.Running {
		// A stopped node (killed, or stopped by hand) starts only after its
		// cluster's load balancer runs: Docker does not reserve the
		// address a stopped container was pinned to, and a node started
		// first may take the load balancer's from the network's dynamic
		// range, which would then never start again on its endpoint.
		if err := b.startStoppedLoadBalancer(ctx, m.Cluster); err != nil {
			return backend.Node{}, err
		}
	}
	c, err = b.ensureRunning(ctx, c)
	if err != nil {
		return backend.Node{}, err
	}
	return nodeFrom(c), nil
}

// nodeFrom reports a node container.
func nodeFrom(c container.InspectResponse) backend.Node {
	name := containerNameOf(c)
	node := backend.Node{ProviderID: v1alpha1.DockerProviderIDPrefix + name}
	hostname := name
	if c.Config != nil && c.Config.Hostname != "" {
		hostname = c.Config.Hostname
	}
	node.Addresses = append(node.Addresses, clusterv1.MachineAddress{Type: clusterv1.MachineHostName, Address: hostname})
	var addr netip.Addr
	if c.Config != nil {
		addr = addressOn(c, c.Config.Labels[LabelNetwork])
	}
	if addr.IsValid() {
		// Like CAPD: the one address is both (nothing else reaches a node).
		node.Addresses = append(node.Addresses,
			clusterv1.MachineAddress{Type: clusterv1.MachineInternalIP, Address: addr.String()},
			clusterv1.MachineAddress{Type: clusterv1.MachineExternalIP, Address: addr.String()},
		)
	}
	node.Provisioned = c.State != nil && c.State.Running && addr.IsValid()
	if c.Config != nil {
		node.FailureDomain = c.Config.Labels[LabelFailureDomain]
	}
	return node
}

// createNode creates and starts the node container of a machine.
func (b *Backend) createNode(ctx context.Context, spec backend.NodeSpec) (container.InspectResponse, error) {
	m := spec.Machine
	networkName := b.network
	if spec.Cluster.Docker != nil && spec.Cluster.Docker.Network != "" {
		networkName = spec.Cluster.Docker.Network
	}
	image := spec.Backend.Docker.Image
	if image == "" {
		if spec.Version == "" {
			return container.InspectResponse{}, fmt.Errorf("machine %s/%s names neither an image nor a Kubernetes version", m.Cluster.Namespace, m.Name)
		}
		image = b.nodeRepo + ":" + spec.Version
	}
	n, err := b.ensureNetwork(ctx, networkName, m.Cluster)
	if err != nil {
		return container.InspectResponse{}, err
	}
	v4, v6, err := checkStaticAddresses(n, spec.StaticAddresses)
	if err != nil {
		return container.InspectResponse{}, fmt.Errorf("machine %s/%s: %w", m.Cluster.Namespace, m.Name, err)
	}

	labels := b.nodeLabels(m)
	labels[LabelNetwork] = n.Name
	labels[v1alpha1.DockerLabelRole] = v1alpha1.DockerRoleWorker
	if spec.ControlPlane {
		labels[v1alpha1.DockerLabelRole] = v1alpha1.DockerRoleControlPlane
	}
	endpoint := &network.EndpointSettings{}
	if v4.IsValid() || v6.IsValid() {
		endpoint.IPAMConfig = &network.EndpointIPAMConfig{IPv4Address: v4, IPv6Address: v6}
	}
	if spec.FailureDomain != "" {
		labels[LabelFailureDomain] = spec.FailureDomain
	}
	opts := func(name string) client.ContainerCreateOptions {
		return client.ContainerCreateOptions{
			Name: name,
			Config: &container.Config{
				Image:    image,
				Hostname: name,
				Labels:   labels,
				// kind's node entrypoint and systemd look for it.
				Env: []string{"container=docker"},
				// systemd logs to the console; kind runs nodes with a TTY.
				Tty: true,
				// Pods, images and logs live on a volume, not in the
				// container's layer (kind does the same).
				Volumes: map[string]struct{}{"/var": {}},
			},
			HostConfig: &container.HostConfig{
				NetworkMode: container.NetworkMode(n.Name),
				// Nested containers need what kind gives its nodes.
				Privileged:    b.privileged,
				SecurityOpt:   []string{"seccomp=unconfined", "apparmor=unconfined"},
				CgroupnsMode:  container.CgroupnsModePrivate,
				Tmpfs:         map[string]string{"/tmp": "", "/run": ""},
				Binds:         b.nodeBinds,
				RestartPolicy: container.RestartPolicy{Name: container.RestartPolicyUnlessStopped},
			},
			NetworkingConfig: &network.NetworkingConfig{
				EndpointsConfig: map[string]*network.EndpointSettings{n.Name: endpoint},
			},
		}
	}

	names := b.containerNames(nodeName(m)...)
	ctrl.LoggerFrom(ctx).Info("Creating node container", "container", names[0], "image", image, "network", n.Name, "failureDomain", spec.FailureDomain)
	id, err := b.createOrAdopt(ctx, names, opts, func(l map[string]string) bool { return hasLabels(l, b.nodeLabels(m)) })
	if err != nil {
		return container.InspectResponse{}, fmt.Errorf("failed to create node container %s: %w", names[0], err)
	}
	c, err := b.inspect(ctx, id)
	if err != nil {
		return c, err
	}
	if c, err = b.ensureFailureDomainNetwork(ctx, c, spec); err != nil {
		return c, err
	}
	c, err = b.ensureRunning(ctx, c)
	if err != nil && isStaticAddressUnsupported(err) {
		// A node that can never start is not kept: the next attempt, once
		// the network is fixed, starts afresh.
		if rmErr := b.removeContainer(ctx, c.ID); rmErr != nil {
			return c, rmErr
		}
		return c, fmt.Errorf("machine %s/%s has static addresses but Docker network %s has no user-configured subnet (create it with --subnet): %w", m.Cluster.Namespace, m.Name, n.Name, err)
	}
	return c, err
}

// ensureFailureDomainNetwork connects the node container c to the Docker
// network its failure domain names (v1alpha1.FailureDomainNetworkAttribute),
// in addition to the cluster's, creating the network when missing; the load
// balancer and static addresses stay on the cluster's network. It connects
// after creation rather than in the create call: Engines before API 1.44
// take one network there. Only the domain the container was created in
// counts (its label): a node never moves.
func (b *Backend) ensureFailureDomainNetwork(ctx context.Context, c container.InspectResponse, spec backend.NodeSpec) (container.InspectResponse, error) {
	name := spec.FailureDomainAttributes[v1alpha1.FailureDomainNetworkAttribute]
	if name == "" || spec.FailureDomain == "" || c.Config == nil || c.Config.Labels[LabelFailureDomain] != spec.FailureDomain {
		return c, nil
	}
	if c.NetworkSettings != nil {
		if _, ok := c.NetworkSettings.Networks[name]; ok {
			return c, nil
		}
	}
	n, err := b.ensureNetwork(ctx, name, spec.Machine.Cluster)
	if err != nil {
		return c, fmt.Errorf("failed to get network %s of failure domain %s: %w", name, spec.FailureDomain, err)
	}
	ctrl.LoggerFrom(ctx).Info("Connecting node container to the failure domain's network", "container", containerNameOf(c), "network", n.Name, "failureDomain", spec.FailureDomain)
	if _, err := b.client.NetworkConnect(ctx, n.ID, client.NetworkConnectOptions{Container: c.ID}); err != nil {
		return c, fmt.Errorf("failed to connect node container %s to network %s of failure domain %s: %w", containerNameOf(c), n.Name, spec.FailureDomain, err)
	}
	return b.inspect(ctx, c.ID)
}

// DeleteNode removes the machine's node container, if any, and takes a
// control-plane node out of the load balancer.
func (b *Backend) DeleteNode(ctx context.Context, machine backend.MachineRef) error {
	items, err := b.listContainers(ctx, b.nodeLabels(machine))
	if err != nil {
		return err
	}
	controlPlane := false
	for _, item := range items {
		ctrl.LoggerFrom(ctx).Info("Deleting node container", "container", item.Names)
		if err := b.removeContainer(ctx, item.ID); err != nil {
			return err
		}
		controlPlane = controlPlane || item.Labels[v1alpha1.DockerLabelRole] == v1alpha1.DockerRoleControlPlane
	}
	if controlPlane {
		return b.refreshLoadBalancer(ctx, machine.Cluster)
	}
	return nil
}
