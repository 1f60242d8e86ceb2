package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"path"
	"strconv"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/infra/internal/backend"
)

// apiServerPort is the load balancer's exposed port, 6443/tcp.
var apiServerPort = network.MustParsePort(strconv.Itoa(APIServerPort) + "/tcp")

// loadBalancerLabels are the labels of a cluster's load balancer.
func (b *Backend) loadBalancerLabels(cluster backend.ClusterRef) map[string]string {
	l := b.clusterLabels(cluster)
	l[v1alpha1.DockerLabelRole] = v1alpha1.DockerRoleLoadBalancer
	return l
}

func loadBalancerLockKey(cluster backend.ClusterRef) string {
	return "lb/" + cluster.Namespace + "/" + cluster.Name
}

func loadBalancerName(cluster backend.ClusterRef) []string {
	return []string{cluster.Namespace, cluster.Name, "lb"}
}

// findLoadBalancer returns the cluster's load balancer, found=false when
// there is none. Were there two (nothing this backend does makes two), the
// oldest is the load balancer.
func (b *Backend) findLoadBalancer(ctx context.Context, cluster backend.ClusterRef) (container.InspectResponse, bool, error) {
	items, err := b.listContainers(ctx, b.loadBalancerLabels(cluster))
	if err != nil {
		return container.InspectResponse{}, false, err
	}
	if len(items) == 0 {
		return container.InspectResponse{}, false, nil
	}
	c, err := b.inspect(ctx, items[0].ID)
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return container.InspectResponse{}, false, nil
		}
		return container.InspectResponse{}, false, err
	}
	return c, true, nil
}

// lbCreate is what one load balancer container is made of.
type lbCreate struct {
	cluster  backend.ClusterRef
	network  string
	image    string
	address  netip.Addr
	hostPort string
	pinned   bool
}

// ensureLoadBalancer makes the cluster's load balancer exist, run and keep
// its address and host port, and returns it.
func (b *Backend) ensureLoadBalancer(ctx context.Context, spec backend.ClusterSpec, n networkInfo) (container.InspectResponse, error) {
	defer b.lock(loadBalancerLockKey(spec.Cluster))()
	docker := spec.Backend.Docker

	c, found, err := b.findLoadBalancer(ctx, spec.Cluster)
	if err != nil {
		return c, err
	}
	if !found {
		want := lbCreate{
			cluster: spec.Cluster,
			network: n.Name,
			image:   valueOr(docker.LoadBalancerImage, b.lbImage),
		}
		if docker.LoadBalancerHostPort != 0 {
			want.hostPort = strconv.Itoa(int(docker.LoadBalancerHostPort))
		}
		// A load balancer lost and made again takes the endpoint's address
		// back, when it is on this network: the Cluster keeps its endpoint.
		if addr, err := netip.ParseAddr(spec.Endpoint.Host); err == nil && n.contains(addr.Unmap()) {
			want.address = addr.Unmap()
		}
		if _, _, _, ok := n.staticRange(); ok {
			// Chosen and taken under one lock per network (until this
			// load balancer is made and pinned), so that two clusters on
			// one network never pick the same address.
			defer b.lock("lb-address/" + n.ID)()
			if !want.address.IsValid() {
				if want.address, err = b.freeStaticAddress(ctx, n); err != nil {
					return c, err
				}
			}
		}
		want.pinned = want.hostPort != "" && want.address.IsValid()
		c, err = b.createLoadBalancer(ctx, want)
		if err != nil {
			return c, err
		}
	}
	c, err = b.startLoadBalancer(ctx, c)
	if err != nil {
		return c, err
	}
	if c.Config != nil && c.Config.Labels[labelPinned] == "true" {
		return c, nil
	}
	return b.pinLoadBalancer(ctx, c)
}

// createLoadBalancer creates and starts a load balancer container. A
// static address on a network without a user-configured subnet (kind's
// own network, for one) is dropped: Docker refuses it there.
func (b *Backend) createLoadBalancer(ctx context.Context, want lbCreate) (container.InspectResponse, error) {
	labels := b.loadBalancerLabels(want.cluster)
	labels[LabelNetwork] = want.network
	if want.pinned {
		labels[labelPinned] = "true"
	}
	opts := func(name string, addr netip.Addr) client.ContainerCreateOptions {
		endpoint := &network.EndpointSettings{}
		if addr.IsValid() {
			endpoint.IPAMConfig = &network.EndpointIPAMConfig{}
			if addr.Is4() {
				endpoint.IPAMConfig.IPv4Address = addr
			} else {
				endpoint.IPAMConfig.IPv6Address = addr
			}
		}
		return client.ContainerCreateOptions{
			Name: name,
			Config: &container.Config{
				Image:        want.image,
				Hostname:     name,
				Labels:       labels,
				ExposedPorts: network.PortSet{apiServerPort: {}},
			},
			HostConfig: &container.HostConfig{
				NetworkMode:   container.NetworkMode(want.network),
				PortBindings:  network.PortMap{apiServerPort: {{HostIP: b.lbHostIP, HostPort: want.hostPort}}},
				RestartPolicy: container.RestartPolicy{Name: container.RestartPolicyUnlessStopped},
			},
			NetworkingConfig: &network.NetworkingConfig{
				EndpointsConfig: map[string]*network.EndpointSettings{want.network: endpoint},
			},
		}
	}

	names := b.containerNames(loadBalancerName(want.cluster)...)
	mine := func(l map[string]string) bool { return hasLabels(l, b.loadBalancerLabels(want.cluster)) }
	log := ctrl.LoggerFrom(ctx)
	log.Info("Creating load balancer container", "container", names[0], "image", want.image)
	create := func(addr netip.Addr) (container.InspectResponse, error) {
		id, err := b.createOrAdopt(ctx, names, func(name string) client.ContainerCreateOptions { return opts(name, addr) }, mine)
		if err != nil {
			return container.InspectResponse{}, fmt.Errorf("failed to create load balancer container %s: %w", names[0], err)
		}
		c, err := b.inspect(ctx, id)
		if err != nil {
			return c, err
		}
		return b.startLoadBalancer(ctx, c)
	}
	c, err := create(want.address)
	if err != nil && want.address.IsValid() && isStaticAddressUnsupported(err) {
		// Docker refuses the address when the container starts.
		log.Info("Network has no user-configured subnet: the load balancer's address may change when Docker restarts", "network", want.network)
		if c.ID != "" {
			if rmErr := b.removeContainer(ctx, c.ID); rmErr != nil {
				return c, rmErr
			}
		}
		c, err = create(netip.Addr{})
	}
	return c, err
}

// pinLoadBalancer makes the address and host port Docker gave the running
// load balancer part of its configuration, by creating it again with them:
// otherwise a Docker restart may hand out others, and the Cluster's endpoint
// (an address) would point nowhere. It runs once per load balancer.
func (b *Backend) pinLoadBalancer(ctx context.Context, c container.InspectResponse) (container.InspectResponse, error) {
	labels := c.Config.Labels
	want := lbCreate{
		cluster: backend.ClusterRef{Namespace: labels[v1alpha1.DockerLabelClusterNamespace], Name: labels[v1alpha1.DockerLabelClusterName]},
		network: labels[LabelNetwork],
		image:   c.Config.Image,
		pinned:  true,
	}
	want.address = addressOn(c, want.network)
	if c.NetworkSettings != nil {
		if bindings := c.NetworkSettings.Ports[apiServerPort]; len(bindings) > 0 {
			want.hostPort = bindings[0].HostPort
		}
	}
	if !want.address.IsValid() || want.hostPort == "" {
		return c, fmt.Errorf("load balancer %s has no address on network %s or no host port yet", containerNameOf(c), want.network)
	}
	ctrl.LoggerFrom(ctx).Info("Pinning the load balancer's address and host port", "container", containerNameOf(c), "address", want.address, "hostPort", want.hostPort)
	if err := b.removeContainer(ctx, c.ID); err != nil {
		return c, err
	}
	return b.createLoadBalancer(ctx, want)
}

// isStaticAddressUnsupported recognises Docker's refusal of a static
// address on a network whose subnet Docker chose itself.
func isStaticAddressUnsupported(err error) bool {
	return strings.Contains(err.Error(), "user configured subnets")
}

// startLoadBalancer starts a load balancer that is not running, with its
// configuration written first: haproxy reads it when it starts, and a
// reload signal sent before haproxy is up would be lost.
func (b *Backend) startLoadBalancer(ctx context.Context, lb container.InspectResponse) (container.InspectResponse, error) {
	if lb.State != nil && lb.State.Running {
		return lb, nil
	}
	cluster := backend.ClusterRef{Namespace: lb.Config.Labels[v1alpha1.DockerLabelClusterNamespace], Name: lb.Config.Labels[v1alpha1.DockerLabelClusterName]}
	want, _, err := b.renderLoadBalancerConfig(ctx, cluster, lb.Config.Labels[LabelNetwork])
	if err != nil {
		return lb, err
	}
	if err := b.writeFile(ctx, lb.ID, HAProxyConfigPath, []byte(want), 0o644); err != nil {
		return lb, err
	}
	return b.ensureRunning(ctx, lb)
}

// renderLoadBalancerConfig renders the haproxy configuration of the
// cluster's control-plane nodes as they are now: the running ones with an
// address on the load balancer's network.
func (b *Backend) renderLoadBalancerConfig(ctx context.Context, cluster backend.ClusterRef, lbNetwork string) (string, int, error) {
	labels := b.clusterLabels(cluster)
	labels[v1alpha1.DockerLabelRole] = v1alpha1.DockerRoleControlPlane
	nodes, err := b.listContainers(ctx, labels)
	if err != nil {
		return "", 0, err
	}
	var servers []HAProxyServer
	for _, n := range nodes {
		if n.State != container.StateRunning || n.NetworkSettings == nil {
			continue
		}
		ep := n.NetworkSettings.Networks[lbNetwork]
		if ep == nil {
			continue
		}
		addr := ep.IPAddress
		if !addr.IsValid() {
			addr = ep.GlobalIPv6Address
		}
		if addr.IsValid() && len(n.Names) > 0 {
			servers = append(servers, HAProxyServer{Name: strings.TrimPrefix(n.Names[0], "/"), Address: addr})
		}
	}
	return RenderHAProxyConfig(servers), len(servers), nil
}

// refreshLoadBalancer renders the load balancer's configuration from the
// cluster's control-plane nodes as they are now and, when it differs from
// the one in the container, writes it and makes haproxy reload; a load
// balancer that stopped is started again. A cluster without a load
// balancer has nothing to refresh.
func (b *Backend) refreshLoadBalancer(ctx context.Context, cluster backend.ClusterRef) error {
	// The same lock as ensureLoadBalancer: a load balancer being pinned
	// (removed and made again) is not written meanwhile.
	defer b.lock(loadBalancerLockKey(cluster))()

	lb, found, err := b.findLoadBalancer(ctx, cluster)
	if err != nil || !found {
		return err
	}
	want, servers, err := b.renderLoadBalancerConfig(ctx, cluster, lb.Config.Labels[LabelNetwork])
	if err != nil {
		return err
	}
	current, err := b.readFile(ctx, lb.ID, HAProxyConfigPath)
	if err != nil && !cerrdefs.IsNotFound(err) {
		return err
	}
	if string(current) == want {
		return b.restartKilledLoadBalancer(ctx, lb)
	}
	ctrl.LoggerFrom(ctx).Info("Updating the load balancer configuration", "container", containerNameOf(lb), "controlPlaneNodes", servers)
	if err := b.writeFile(ctx, lb.ID, HAProxyConfigPath, []byte(want), 0o644); err != nil {
		return err
	}
	// Read it back before the reload: haproxy must not read a half-written
	// file (CAPD met this, cluster-api#10356).
	written, err := b.readFile(ctx, lb.ID, HAProxyConfigPath)
	if err != nil {
		return err
	}
	if !bytes.Equal(written, []byte(want)) {
		return fmt.Errorf("the load balancer configuration read back from %s differs from the one written", containerNameOf(lb))
	}
	if lb.State == nil || !lb.State.Running {
		// It reads the file when it starts.
		return b.restartKilledLoadBalancer(ctx, lb)
	}
	if _, err := b.client.ContainerKill(ctx, lb.ID, client.ContainerKillOptions{Signal: "SIGHUP"}); err != nil {
		return fmt.Errorf("failed to make the load balancer %s reload its configuration: %w", containerNameOf(lb), err)
	}
	return nil
}

// restartKilledLoadBalancer starts a load balancer that stopped (killed,
// or stopped by hand) with the configuration already in it. Docker does
// not restart it: a `docker kill` counts as a manual stop, which even the
// unless-stopped restart policy respects. ReconcileCluster starts it too,
// but nothing reconciles a steady cluster again, while its control-plane
// machines are requeued: they heal the load balancer here, on the
// address and host port it was pinned to, so the endpoint does not move.
func (b *Backend) restartKilledLoadBalancer(ctx context.Context, lb container.InspectResponse) error {
	if lb.State != nil && lb.State.Running {
		return nil
	}
	ctrl.LoggerFrom(ctx).Info("Starting the stopped load balancer", "container", containerNameOf(lb))
	_, err := b.ensureRunning(ctx, lb)
	return err
}

// startStoppedLoadBalancer starts the cluster's load balancer when it
// exists and stopped; the configuration in it is refreshed afterwards by
// the control-plane nodes' reconciles.
func (b *Backend) startStoppedLoadBalancer(ctx context.Context, cluster backend.ClusterRef) error {
	defer b.lock(loadBalancerLockKey(cluster))()
	lb, found, err := b.findLoadBalancer(ctx, cluster)
	if err != nil || !found {
		return err
	}
	return b.restartKilledLoadBalancer(ctx, lb)
}

// writeFile writes one file in a container through the archive API, which
// needs nothing in the image (kindest/haproxy has no shell).
func (b *Backend) writeFile(ctx context.Context, containerID, filePath string, content []byte, mode int64) error {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{
		Typeflag: tar.TypeReg,
		Name:     path.Base(filePath),
		Mode:     mode,
		Size:     int64(len(content)),
		ModTime:  time.Now(),
	}); err != nil {
		return fmt.Errorf("failed to archive %s: %w", filePath, err)
	}
	if _, err := tw.Write(content); err != nil {
		return fmt.Errorf("failed to archive %s: %w", filePath, err)
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("failed to archive %s: %w", filePath, err)
	}
	if _, err := b.client.CopyToContainer(ctx, containerID, client.CopyToContainerOptions{
		DestinationPath: path.Dir(filePath),
		Content:         &buf,
	}); err != nil {
		return fmt.Errorf("failed to write %s in container %s: %w", filePath, containerID, err)
	}
	return nil
}

// readFile reads one file of a container through the archive API.
func (b *Backend) readFile(ctx context.Context, containerID, filePath string) ([]byte, error) {
	res, err := b.client.CopyFromContainer(ctx, containerID, client.CopyFromContainerOptions{SourcePath: filePath})
	if err != nil {
		return nil, fmt.Errorf("failed to read %s in container %s: %w", filePath, containerID, err)
	}
	defer func() { _ = res.Content.Close() }()
	tr := tar.NewReader(res.Content)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("failed to read %s in container %s: %w", filePath, containerID, cerrdefs.ErrNotFound)
		}
		if err != nil {
			return nil, fmt.Errorf("failed to read %s in container %s: %w", filePath, containerID, err)
		}
		if h.Typeflag == tar.TypeReg {
			return io.ReadAll(tr)
		}
	}
}
