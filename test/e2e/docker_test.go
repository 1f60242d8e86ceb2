package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"

	"github.com/moby/moby/client"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	infrav1 "github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/test/flavortest"
)

const (
	// The images `make docker-test-images` builds: nothing can be pulled.
	testNodeImage         = "capi-monolith/test-node:dev"
	testLoadBalancerImage = "capi-monolith/test-haproxy:dev"
)

// The docker flavor on the real Docker Engine: a container per machine and
// one load balancer, all gone once the cluster is deleted. The test node
// image runs no kubelet, so Machines stop at Provisioned.
var _ = Describe("A cluster from cluster-template-docker.yaml (docker backend)", Ordered, func() {
	const name = "docker"
	var (
		namespace string
		docker    *client.Client
	)

	BeforeAll(func(ctx SpecContext) {
		var err error
		docker, err = client.New(client.FromEnv)
		Expect(err).NotTo(HaveOccurred(), "the docker backend's suite needs a Docker Engine")
		DeferCleanup(docker.Close)
		for _, image := range []string{testNodeImage, testLoadBalancerImage} {
			_, err := docker.ImageInspect(ctx, image)
			Expect(err).NotTo(HaveOccurred(), "image %s is missing: run `make docker-test-images`", image)
		}

		namespace = createNamespace(ctx, "e2e-docker")
		suffix := make([]byte, 3)
		_, _ = rand.Read(suffix)
		vars := templateVars(namespace, name)
		// A network of its own, so that parallel suites never share one.
		vars["MONOLITH_DOCKER_NETWORK"] = "capi-monolith-e2e-" + hex.EncodeToString(suffix)
		vars["MONOLITH_DOCKER_NODE_IMAGE"] = testNodeImage
		vars["MONOLITH_DOCKER_LOAD_BALANCER_IMAGE"] = testLoadBalancerImage
		// The template's kubeadm data would run kubeadm in the nodes, which
		// the test node image cannot: test-only objects stand in for the
		// kubeadm ones (see package flavortest).
		objs, err := flavortest.WithoutKubeadm(render("cluster-template-docker.yaml", vars))
		Expect(err).NotTo(HaveOccurred())
		apply(ctx, objs)
	})

	It("should run a container per machine and a load balancer", func(ctx SpecContext) {
		expectClusterProvisioned(ctx, namespace, name)
		machines := expectProvisionedMachines(ctx, namespace, name, 2)
		for _, m := range machines {
			Expect(m.Spec.ProviderID).To(HavePrefix("docker:////"))
		}
		Eventually(func() ([]string, error) {
			return containers(ctx, docker, namespace, name)
		}).WithTimeout(provisionTimeout).WithPolling(poll).Should(HaveLen(3), "two nodes and a load balancer")
	})

	It("should scale the MachineDeployment 1→2→1 with containers", func(ctx SpecContext) {
		scaleMachineDeployment(ctx, namespace, name+"-md-0", 2)
		expectProvisionedMachines(ctx, namespace, name, 3)
		Eventually(func() ([]string, error) {
			return containers(ctx, docker, namespace, name)
		}).WithTimeout(provisionTimeout).WithPolling(poll).Should(HaveLen(4))
		scaleMachineDeployment(ctx, namespace, name+"-md-0", 1)
		expectProvisionedMachines(ctx, namespace, name, 2)
		Eventually(func() ([]string, error) {
			return containers(ctx, docker, namespace, name)
		}).WithTimeout(deleteTimeout).WithPolling(poll).Should(HaveLen(3))
	})

	It("should leave no container behind once the cluster is deleted", func(ctx SpecContext) {
		deleteClusterAndWait(ctx, namespace, name)
		Eventually(func() ([]string, error) {
			return containers(ctx, docker, namespace, name)
		}).WithTimeout(deleteTimeout).WithPolling(poll).Should(BeEmpty())
	})
})

// containers lists the names of every container (running or not) labelled
// with the cluster.
func containers(ctx context.Context, docker *client.Client, namespace, cluster string) ([]string, error) {
	filters := make(client.Filters).
		Add("label", infrav1.DockerLabelClusterNamespace+"="+namespace).
		Add("label", infrav1.DockerLabelClusterName+"="+cluster)
	res, err := docker.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: filters})
	if err != nil {
		return nil, err
	}
	var names []string
	for _, c := range res.Items {
		names = append(names, strings.Join(c.Names, ","))
	}
	return names, nil
}
