package docker

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	. "github.com/onsi/gomega"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/infra/internal/backend"
)

// The images `make docker-test-images` builds (hack/docker-test-images):
// nothing can be pulled where these tests run.
const (
	testNodeImage = "capi-monolith/test-node:dev"
	testLBImage   = "capi-monolith/test-haproxy:dev"

	// testTimeout bounds one test's Docker work.
	testTimeout = 3 * time.Minute
)

// testContext bounds a test's Docker work and logs the backend's messages
// to the test.
func testContext(t *testing.T) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	return ctrl.LoggerInto(ctx, testr.New(t)), cancel
}

// newTestBackend returns a Backend on the Docker Engine of the environment.
// The tests fail, never skip, when it or the test images are missing.
func newTestBackend(t *testing.T) *Backend {
	t.Helper()
	return newTestBackendOf(t, "")
}

// newTestBackendOf is newTestBackend working for the management cluster
// identity.
func newTestBackendOf(t *testing.T, identity string) *Backend {
	t.Helper()
	b, err := New(Options{
		ManagementCluster: identity,
		// The test host may have no /lib/modules; the test node needs none.
		NodeBinds: []string{},
		// The project's Docker daemon runs sandboxed and refuses privileged
		// containers; the busybox test node needs no privilege.
		UnprivilegedNodes: true,
	})
	if err != nil {
		t.Fatalf("failed to create the docker backend: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := b.Ping(ctx); err != nil {
		t.Fatalf("the docker backend tests need a Docker Engine (DOCKER_HOST=%q): %v", os.Getenv("DOCKER_HOST"), err)
	}
	for _, image := range []string{testNodeImage, testLBImage} {
		if _, err := b.client.ImageInspect(ctx, image); err != nil {
			t.Fatalf("test image %s is missing: run `make docker-test-images` (hack/docker-test-images/build.sh): %v", image, err)
		}
	}
	return b
}

// testEnv is one test's cluster: unique names, its own network, deleted
// when the test ends.
type testEnv struct {
	b       *Backend
	cluster backend.ClusterRef
	network string
}

func newTestEnv(t *testing.T, b *Backend) *testEnv {
	t.Helper()
	suffix := randomSuffix(t)
	env := &testEnv{
		b:       b,
		cluster: backend.ClusterRef{Namespace: "ns-" + suffix, Name: "c-" + suffix},
		network: "capi-monolith-test-" + suffix,
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		ctx = ctrl.LoggerInto(ctx, logr.Discard())
		if err := b.DeleteCluster(ctx, env.cluster); err != nil {
			t.Errorf("cleanup: failed to delete cluster %v: %v", env.cluster, err)
		}
		// A network the test made itself (not through the backend) goes too.
		if n, found, err := b.findNetwork(ctx, env.network); err == nil && found {
			_, _ = b.client.NetworkRemove(ctx, n.ID, client.NetworkRemoveOptions{})
		}
	})
	return env
}

func randomSuffix(t *testing.T) string {
	t.Helper()
	buf := make([]byte, 4)
	if _, err := rand.Read(buf); err != nil {
		t.Fatalf("failed to read random bytes: %v", err)
	}
	return hex.EncodeToString(buf)
}

func (e *testEnv) clusterSpec() backend.ClusterSpec {
	return backend.ClusterSpec{
		Cluster: e.cluster,
		Backend: v1alpha1.ClusterBackend{Docker: &v1alpha1.DockerClusterBackend{
			Network:           e.network,
			LoadBalancerImage: testLBImage,
		}},
	}
}

func (e *testEnv) nodeSpec(machine string, controlPlane bool, static ...backend.StaticAddress) backend.NodeSpec {
	return backend.NodeSpec{
		Machine:         backend.MachineRef{Cluster: e.cluster, Name: machine},
		Cluster:         e.clusterSpec().Backend,
		Backend:         v1alpha1.MachineBackend{Docker: &v1alpha1.DockerMachineBackend{Image: testNodeImage}},
		ControlPlane:    controlPlane,
		Version:         "v1.36.3",
		StaticAddresses: static,
	}
}

func (e *testEnv) machine(name string) backend.MachineRef {
	return backend.MachineRef{Cluster: e.cluster, Name: name}
}

// containers lists the containers labelled with the test's cluster and the
// extra labels.
func (e *testEnv) containers(g Gomega, ctx context.Context, extra map[string]string) []container.Summary {
	labels := e.b.clusterLabels(e.cluster)
	for k, v := range extra {
		labels[k] = v
	}
	items, err := e.b.listContainers(ctx, labels)
	g.Expect(err).NotTo(HaveOccurred())
	return items
}

// networkInfo returns the test's network; it must exist.
func (e *testEnv) networkInfo(g Gomega, ctx context.Context) networkInfo {
	n, found, err := e.b.findNetwork(ctx, e.network)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(BeTrue(), "network %s exists", e.network)
	return toNetworkInfo(n)
}

// sh runs a shell script in a container and returns its output; it must
// succeed.
func (e *testEnv) sh(g Gomega, ctx context.Context, containerID, script string) string {
	res, err := e.b.exec(ctx, containerID, []string{"sh", "-c", script}, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.ExitCode).To(Equal(0), "script %q: %s", script, res.Output)
	return string(res.Output)
}

// nodeContainer returns the machine's node container; it must exist.
func (e *testEnv) nodeContainer(g Gomega, ctx context.Context, machine string) container.InspectResponse {
	c, found, err := e.b.findNode(ctx, e.machine(machine))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(BeTrue(), "machine %s has a node container", machine)
	return c
}

// loadBalancer returns the cluster's load balancer; it must exist.
func (e *testEnv) loadBalancer(g Gomega, ctx context.Context) container.InspectResponse {
	c, found, err := e.b.findLoadBalancer(ctx, e.cluster)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(BeTrue(), "cluster has a load balancer")
	return c
}

// haproxyLoads counts the configurations the load balancer's haproxy has
// loaded: one when it starts, one per reload.
func (e *testEnv) haproxyLoads(g Gomega, ctx context.Context, containerID string) int {
	logs, err := e.b.client.ContainerLogs(ctx, containerID, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true})
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = logs.Close() }()
	var out bytes.Buffer
	_, err = stdcopy.StdCopy(&out, &out, logs)
	g.Expect(err).NotTo(HaveOccurred())
	return strings.Count(out.String(), "Loading success")
}

// addressIn returns the n-th address of the network's first subnet.
func addressIn(g Gomega, n networkInfo, index int) netip.Addr {
	g.Expect(n.Subnets).NotTo(BeEmpty())
	addr := n.Subnets[0].Addr()
	for range index {
		addr = addr.Next()
	}
	return addr
}
