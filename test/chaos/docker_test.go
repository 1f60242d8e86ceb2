//go:build chaos

package chaos

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	. "github.com/onsi/gomega"

	infrav1 "github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
)

const (
	// The images `make docker-test-images` builds: nothing can be pulled.
	testNodeImage         = "capi-monolith/test-node:dev"
	testLoadBalancerImage = "capi-monolith/test-haproxy:dev"
)

// The docker flavor while the Docker Engine's containers of the cluster
// (every node and the load balancer) are SIGKILLed with `docker kill`
// after each step, and once more after the cluster converged. What a
// mature provider does, and what is checked: a killed node or load
// balancer is started again by the next reconcile of its machine or
// cluster (its address and host port are pinned, so the endpoint does
// not move), every Machine converges, and deletion leaves no container
// or network behind.
func TestDockerContainersKilledWhileAClusterIsCreatedScaledAndDeleted(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	docker, err := client.New(client.FromEnv, client.WithAPIVersionNegotiation())
	g.Expect(err).NotTo(HaveOccurred(), "the docker flavor needs a Docker Engine")
	t.Cleanup(func() { _ = docker.Close() })
	for _, image := range []string{testNodeImage, testLoadBalancerImage} {
		_, err := docker.ImageInspect(ctx, image)
		g.Expect(err).NotTo(HaveOccurred(), "image %s is missing: run `make docker-test-images`", image)
	}

	suffix := make([]byte, 3)
	_, _ = rand.Read(suffix)
	network := "capi-monolith-chaos-" + hex.EncodeToString(suffix)
	var c *chaosCluster
	// A failed run leaves the Engine as it found it too (after the
	// manager stopped: cleanups run last registered first).
	t.Cleanup(func() { removeDockerObjects(t, docker, c.namespace, network) })
	// The Engine of CI machines may not grant privileged containers, as
	// in the e2e suite.
	m := startManager(t, "--docker-unprivileged-nodes")
	// The docker backend executes bootstrap data, and no image here runs
	// kubeadm (no kind image can be pulled): the flavor goes in without
	// its kubeadm objects, and its Machines converge to Provisioned.
	c = &chaosCluster{name: "d", template: "cluster-template-docker.yaml", machines: 3, withoutKubeadm: true, vars: map[string]string{
		// A network of its own, so that parallel suites never share one.
		"MONOLITH_DOCKER_NETWORK":             network,
		"MONOLITH_DOCKER_NODE_IMAGE":          testNodeImage,
		"MONOLITH_DOCKER_LOAD_BALANCER_IMAGE": testLoadBalancerImage,
	}}
	c.docker = func(ctx context.Context, g Gomega) int { return expectContainersRunning(ctx, g, docker, c) }
	kills := &containerKills{docker: docker, cluster: c}
	p := plan{
		clusters: []*chaosCluster{c},
		steps: []func(context.Context, Gomega){
			func(ctx context.Context, g Gomega) { scaleMachineDeployment(ctx, g, c.namespace, "d-md-0", 2) },
			// Kills once everything runs: nothing else would make the
			// provider look at the cluster again.
			func(ctx context.Context, g Gomega) {
				g.Eventually(func(g Gomega) { expectContainersRunning(ctx, g, docker, c) }).
					WithTimeout(convergeTimeout).WithPolling(poll).Should(Succeed(), "every container runs before the steady-state kill")
			},
			func(ctx context.Context, g Gomega) { scaleMachineDeployment(ctx, g, c.namespace, "d-md-0", 3) },
			func(ctx context.Context, g Gomega) { scaleMachineDeployment(ctx, g, c.namespace, "d-md-0", 2) },
		},
		deletionFaults: 1,
		fault:          &fault{name: "docker kill of the cluster's containers", do: func() { kills.killAll(ctx, t) }},
		m:              m,
	}
	fig := p.run(t)

	// Nothing of the cluster is left on the Engine.
	g.Eventually(func(g Gomega) {
		left, err := dockerLeftovers(ctx, docker, c.namespace, network)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(left).To(BeEmpty(), "containers and networks left on the Docker Engine")
	}).WithTimeout(convergeTimeout).WithPolling(poll).Should(Succeed())
	g.Expect(kills.containers).To(BeNumerically(">=", 5), "containers killed")
	t.Logf("chaos figures (docker kill): %s containers killed=%d (load balancer %d) docker objects left=0", fig, kills.containers, kills.loadBalancers)
}

// containerKills SIGKILLs every running container of a cluster, through
// the Engine's API as `docker kill` does, and counts them.
type containerKills struct {
	docker                    *client.Client
	cluster                   *chaosCluster
	containers, loadBalancers int
}

func (k *containerKills) killAll(ctx context.Context, t *testing.T) {
	t.Helper()
	g := NewWithT(t)
	list, err := clusterContainers(ctx, k.docker, k.cluster.namespace, k.cluster.name)
	g.Expect(err).NotTo(HaveOccurred())
	for _, item := range list {
		if item.State != container.StateRunning {
			continue
		}
		if _, err := k.docker.ContainerKill(ctx, item.ID, client.ContainerKillOptions{Signal: "SIGKILL"}); err != nil {
			// It may have stopped or gone meanwhile (a scale-down).
			t.Logf("docker kill %s: %v", strings.Join(item.Names, ","), err)
			continue
		}
		k.containers++
		if item.Labels[infrav1.DockerLabelRole] == "load-balancer" {
			k.loadBalancers++
		}
	}
}

func clusterContainers(ctx context.Context, docker *client.Client, namespace, cluster string) ([]container.Summary, error) {
	filters := make(client.Filters).
		Add("label", infrav1.DockerLabelClusterNamespace+"="+namespace).
		Add("label", infrav1.DockerLabelClusterName+"="+cluster)
	res, err := docker.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: filters})
	if err != nil {
		return nil, err
	}
	return res.Items, nil
}

// expectContainersRunning checks that the cluster has one running node
// container per Machine and one running load balancer, and returns how
// many containers it checked.
func expectContainersRunning(ctx context.Context, g Gomega, docker *client.Client, c *chaosCluster) int {
	list, err := clusterContainers(ctx, docker, c.namespace, c.name)
	g.Expect(err).NotTo(HaveOccurred())
	var nodes, lbs int
	for _, item := range list {
		g.Expect(item.State).To(Equal(container.StateRunning), "container %s runs", strings.Join(item.Names, ","))
		if item.Labels[infrav1.DockerLabelRole] == "load-balancer" {
			lbs++
		} else {
			nodes++
		}
	}
	g.Expect(lbs).To(Equal(1), "one load balancer")
	g.Expect(nodes).To(Equal(c.machines), "one node per Machine")
	return len(list)
}

// dockerLeftovers lists the containers carrying the namespace's label and
// the network, if it still exists.
func dockerLeftovers(ctx context.Context, docker *client.Client, namespace, network string) ([]string, error) {
	var left []string
	filters := make(client.Filters).Add("label", infrav1.DockerLabelClusterNamespace+"="+namespace)
	containers, err := docker.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: filters})
	if err != nil {
		return nil, err
	}
	for _, item := range containers.Items {
		left = append(left, "container "+strings.Join(item.Names, ","))
	}
	networks, err := docker.NetworkList(ctx, client.NetworkListOptions{Filters: make(client.Filters).Add("name", network)})
	if err != nil {
		return nil, err
	}
	for _, n := range networks.Items {
		if n.Name == network {
			left = append(left, "network "+n.Name)
		}
	}
	return left, nil
}

// removeDockerObjects removes what is left with the namespace's label and
// the network, when a run failed before its deletion; nothing otherwise.
func removeDockerObjects(t *testing.T, docker *client.Client, namespace, network string) {
	ctx := context.Background()
	if namespace != "" {
		filters := make(client.Filters).Add("label", infrav1.DockerLabelClusterNamespace+"="+namespace)
		list, err := docker.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: filters})
		if err == nil {
			for _, item := range list.Items {
				if _, err := docker.ContainerRemove(ctx, item.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil {
					t.Logf("removing container %s: %v", strings.Join(item.Names, ","), err)
				}
			}
		}
	}
	_, _ = docker.NetworkRemove(ctx, network, client.NetworkRemoveOptions{})
}
