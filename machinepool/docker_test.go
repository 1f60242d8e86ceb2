package machinepool_test

import (
	"context"
	"testing"

	"github.com/moby/moby/client"
	. "github.com/onsi/gomega"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/capi-monolith/capi-monolith/infra"
	infrav1 "github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/machinepool/api/v1alpha1"
)

// Images built by `make docker-test-images`: nothing can be pulled here.
const (
	testNodeImage = "capi-monolith/test-node:dev"
	testLBImage   = "capi-monolith/test-haproxy:dev"
	// bootstrapData writes what real bootstrap data (kubeadm's) writes
	// when done.
	bootstrapData = `#cloud-config
runcmd:
- mkdir -p /run/cluster-api
- echo success > /run/cluster-api/bootstrap-success.complete
`
)

func dockerClient(t *testing.T) *client.Client {
	t.Helper()
	c, err := client.New(client.FromEnv, client.WithAPIVersionNegotiation())
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	_, err = c.Ping(context.Background(), client.PingOptions{})
	NewWithT(t).Expect(err).NotTo(HaveOccurred(), "this test needs a Docker Engine (set DOCKER_HOST)")
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// nodeContainers are the names of the node containers of the test
// cluster's machines, from their labels.
func nodeContainers(g Gomega, c *client.Client, namespace string) []string {
	res, err := c.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: client.Filters{}.
		Add("label", infrav1.DockerLabelClusterNamespace+"="+namespace, infrav1.DockerLabelClusterName+"=c", infrav1.DockerLabelRole+"="+infrav1.DockerRoleWorker)})
	g.Expect(err).NotTo(HaveOccurred())
	var names []string
	for _, s := range res.Items {
		names = append(names, s.Labels[infrav1.DockerLabelMachine])
	}
	return names
}

// removeCluster removes the containers of the test cluster and its network,
// found by the docker backend's labels.
func removeCluster(c *client.Client, namespace, network string) {
	ctx := context.Background()
	res, err := c.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: client.Filters{}.
		Add("label", infrav1.DockerLabelClusterNamespace+"="+namespace, infrav1.DockerLabelClusterName+"=c")})
	if err == nil {
		for _, s := range res.Items {
			_, _ = c.ContainerRemove(ctx, s.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
		}
	}
	_, _ = c.NetworkRemove(ctx, network, client.NetworkRemoveOptions{})
}

// The scale sequence on the real Docker Engine: one running, bootstrapped
// container per instance at every step, none left at zero.
func TestDockerPoolScalesWithMachinePoolMachines(t *testing.T) {
	dc := dockerClient(t)
	// Registered before the manager starts, so that it runs once the
	// manager has stopped (which would make the load balancer again):
	// whatever happened, leave no container or network on the host.
	var ns string
	network := "capim-pool-" + utilrand.String(5)
	t.Cleanup(func() {
		if ns == "" {
			return
		}
		// Pause the Cluster first: its objects stay in the API, and the
		// manager of every later test in this suite would otherwise make
		// its load balancer and network again (the leak the leftover check
		// in TestMain found).
		cluster := &clusterv1.Cluster{}
		if err := env.Client.Get(context.Background(), crclient.ObjectKey{Namespace: ns, Name: "c"}, cluster); err == nil {
			base := cluster.DeepCopy()
			cluster.Spec.Paused = ptr.To(true)
			if err := env.Client.Patch(context.Background(), cluster, crclient.MergeFrom(base)); err != nil {
				t.Errorf("failed to pause the test's Cluster: %v", err)
			}
		}
		removeCluster(dc, ns, network)
	})
	infraOpts := infra.DefaultOptions()
	infraOpts.DockerUnprivilegedNodes = true
	startWith(t, infraOpts)
	f := newFixture(t, fixtureOptions{
		clusterBackend: infrav1.ClusterBackend{Docker: &infrav1.DockerClusterBackend{
			Network: network, LoadBalancerImage: testLBImage}},
		instance:  v1alpha1.InstanceTemplate{Backend: infrav1.MachineBackend{Docker: &infrav1.DockerMachineBackend{Image: testNodeImage}}},
		bootstrap: bootstrapData,
		created:   func(n string) { ns = n },
	})
	scaleThrough(t, f, func(g Gomega, instances []infrav1.MonolithMachine) {
		g.Expect(nodeContainers(g, dc, f.ns)).To(ConsistOf(names(ptrs(instances))), "one container per instance")
		for _, mm := range instances {
			g.Expect(mm.Spec.ProviderID).To(HavePrefix(infrav1.DockerProviderIDPrefix))
		}
	}, 0, 3, 5, 2, 0)
}
