package image_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	clusterctl "sigs.k8s.io/cluster-api/cmd/clusterctl/client"
	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/capi-monolith/capi-monolith/dev/ports"
	infrav1 "github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	ipamv1alpha1 "github.com/capi-monolith/capi-monolith/ipam/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/kustomize/bundle"
	"github.com/capi-monolith/capi-monolith/test/envtest"
	"github.com/capi-monolith/capi-monolith/test/managertest"
)

const (
	// imageEnv names the image under test; make test sets it to the image
	// make image built.
	imageEnv     = "CAPI_MONOLITH_TEST_IMAGE"
	defaultImage = "capi-monolith:dev"
	// testLBImage is built by make docker-test-images: nothing is pulled.
	testLBImage = "capi-monolith/test-haproxy:dev"
	testVersion = "v0.1.0"
	// dockerSocket is the socket the bundle mounts from the node.
	dockerSocket = "/var/run/docker.sock"
	// Where the test mounts what a pod gets from Kubernetes: the kubeconfig
	// stands in for the ServiceAccount token, the namespace file is the
	// ServiceAccount's (leader election reads it).
	kubeconfigDir     = "/etc/capi-monolith"
	serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"
	timeout           = 60 * time.Second
)

func TestMain(m *testing.M) {
	ctrl.SetLogger(envtest.TestLogger())
	os.Exit(m.Run())
}

func testImage() string {
	if v := os.Getenv(imageEnv); v != "" {
		return v
	}
	return defaultImage
}

// TestImageRunsEveryProviderAsClusterctlInstallsIt runs one container per
// provider type, one after another (each against an apiserver of its own,
// which calls that container's webhooks).
func TestImageRunsEveryProviderAsClusterctlInstallsIt(t *testing.T) {
	g := NewWithT(t)
	image := testImage()
	out, err := exec.Command("docker", "image", "inspect", "--format", "{{.Config.User}}", image).CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "the image %s is missing (make image): %s", image, out)
	g.Expect(strings.TrimSpace(string(out))).To(Equal("65532:65532"), "the image runs as non-root")

	// The bundle as a user of the docker backend pointing at their image
	// renders it (clusterctl-docker.yaml: the socket is mounted), with the
	// node's Docker socket group.
	var st syscall.Stat_t
	g.Expect(syscall.Stat(dockerSocket, &st)).To(Succeed(), "these tests need the Docker Engine on %s", dockerSocket)
	t.Setenv("MONOLITH_DOCKER_SOCKET_GID", strconv.FormatUint(uint64(st.Gid), 10))
	repo := t.TempDir()
	g.Expect(bundle.Write(repo, bundle.Options{Version: testVersion, Image: image})).To(Succeed())
	cc, err := clusterctl.New(t.Context(), filepath.Join(repo, bundle.ClusterctlDockerConfigFile))
	g.Expect(err).NotTo(HaveOccurred())

	for _, p := range bundle.Providers {
		t.Run(p.Label, func(t *testing.T) {
			comps, err := cc.GetProviderComponents(t.Context(), bundle.ProviderName, clusterctlv1.ProviderType(p.Type),
				clusterctl.ComponentsOptions{Version: testVersion})
			NewWithT(t).Expect(err).NotTo(HaveOccurred())
			c := startProvider(t, comps)
			switch p.Overlay {
			case "infrastructure":
				c.checkInfrastructure(t, st.Gid)
			case "ipam":
				c.checkIPAM(t)
			case "runtime-extension":
				c.checkRuntimeExtension(t)
			default:
				t.Fatalf("no check for provider %s", p.Label)
			}
		})
	}
}

// provider is one running container and its apiserver.
type provider struct {
	env        *envtest.Environment
	deployment *appsv1.Deployment
	namespace  string
	container  string
	webhook    string // host:port
}

// startProvider starts an apiserver with the components' CRDs and webhook
// configurations, and the image as the components' Deployment describes it.
func startProvider(t *testing.T, comps clusterctl.Components) *provider {
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	y, err := comps.Yaml()
	g.Expect(err).NotTo(HaveOccurred())
	dir := t.TempDir()
	g.Expect(os.WriteFile(filepath.Join(dir, "components.yaml"), y, 0o644)).To(Succeed())
	scheme, err := envtest.NewScheme()
	g.Expect(err).NotTo(HaveOccurred())
	for _, mod := range managertest.All() {
		g.Expect(mod.AddToScheme(scheme)).To(Succeed())
	}
	env, err := envtest.Start(ctx, envtest.Options{
		Scheme:                scheme,
		CRDDirectoryPaths:     []string{dir},
		WebhookInstallOptions: crenvtest.WebhookInstallOptions{Paths: []string{dir}},
	})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { NewWithT(t).Expect(env.Stop()).To(Succeed()) })

	var d *appsv1.Deployment
	for _, o := range comps.Objs() {
		if o.GetKind() == "Deployment" {
			d = &appsv1.Deployment{}
			g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, d)).To(Succeed())
		}
	}
	g.Expect(d).NotTo(BeNil(), "the components have a Deployment")
	p := &provider{env: env, deployment: d, namespace: comps.TargetNamespace()}
	g.Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.namespace}})).To(Succeed())
	// The ClusterRoles, as clusterctl creates them: the runtime extension's
	// registration reads the one that owns its ExtensionConfig.
	for _, o := range comps.Objs() {
		if o.GetKind() == "ClusterRole" {
			g.Expect(env.Client.Create(ctx, o.DeepCopy())).To(Succeed())
		}
	}

	// What the pod would get: the serving certificate (cert-manager's
	// Secret; here envtest's, which the apiserver trusts), the
	// ServiceAccount's namespace file and credentials (a kubeconfig).
	// Readable by the container's user, as Kubernetes mounts them.
	wio := env.WebhookInstallOptions
	certDir := filepath.Join(t.TempDir(), "cert")
	g.Expect(os.Mkdir(certDir, 0o755)).To(Succeed())
	for _, f := range []string{"tls.crt", "tls.key"} {
		b, err := os.ReadFile(filepath.Join(wio.LocalServingCertDir, f))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(os.WriteFile(filepath.Join(certDir, f), b, 0o644)).To(Succeed())
	}
	saDir := filepath.Join(t.TempDir(), "sa")
	g.Expect(os.Mkdir(saDir, 0o755)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(saDir, "namespace"), []byte(p.namespace), 0o644)).To(Succeed())
	kcDir := filepath.Join(t.TempDir(), "kubeconfig")
	g.Expect(os.Mkdir(kcDir, 0o755)).To(Succeed())
	g.Expect(env.WriteKubeconfig(filepath.Join(kcDir, "kubeconfig"))).To(Succeed())
	g.Expect(os.Chmod(filepath.Join(kcDir, "kubeconfig"), 0o644)).To(Succeed())

	healthPort, err := ports.One()
	g.Expect(err).NotTo(HaveOccurred())
	diagPort, err := ports.One()
	g.Expect(err).NotTo(HaveOccurred())
	p.webhook = fmt.Sprintf("%s:%d", wio.LocalServingHost, wio.LocalServingPort)
	p.container = "capim-image-test-" + p.namespace + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	args := dockerRunArgs(t, d, p.container, map[string]string{
		"cert": certDir, "docker-socket": dockerSocket,
	})
	args = append(args,
		"-v", kcDir+":"+kubeconfigDir+":ro",
		"-v", saDir+":"+serviceAccountDir+":ro",
		"-e", "POD_NAMESPACE="+p.namespace, "-e", "POD_NAME="+p.container, "-e", "POD_UID="+p.container,
		// Host network: the pod's IP is the host's; loopback here.
		"-e", "POD_IP=127.0.0.1",
		d.Spec.Template.Spec.Containers[0].Image)
	// The kubelet expands $(VAR) in args from the container's environment.
	podEnv := map[string]string{"POD_NAMESPACE": p.namespace, "POD_NAME": p.container, "POD_UID": p.container, "POD_IP": "127.0.0.1"}
	for _, a := range d.Spec.Template.Spec.Containers[0].Args {
		for k, v := range podEnv {
			a = strings.ReplaceAll(a, "$("+k+")", v)
		}
		args = append(args, a)
	}
	// Host network: ports the Deployment's pod would have to itself are
	// moved to free ones (later flags win), and the kubeconfig stands in
	// for in-cluster credentials.
	args = append(args,
		"--kubeconfig="+kubeconfigDir+"/kubeconfig",
		"--webhook-port="+strconv.Itoa(wio.LocalServingPort),
		fmt.Sprintf("--health-addr=127.0.0.1:%d", healthPort),
		fmt.Sprintf("--diagnostics-address=127.0.0.1:%d", diagPort))
	out, err := exec.Command("docker", args...).CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "docker %s: %s", strings.Join(args, " "), out)
	t.Cleanup(func() {
		if t.Failed() {
			logs, _ := exec.Command("docker", "logs", "--tail", "200", p.container).CombinedOutput()
			t.Logf("container %s logs:\n%s", p.container, logs)
		}
		_ = exec.Command("docker", "rm", "-f", p.container).Run()
	})

	// Ready as the readinessProbe sees it: /readyz answers only once the
	// webhook server serves.
	probe := d.Spec.Template.Spec.Containers[0].ReadinessProbe
	g.Expect(probe).NotTo(BeNil())
	g.Eventually(func(g Gomega) {
		if !p.running() {
			StopTrying("the container exited").Now()
		}
		res, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d%s", healthPort, probe.HTTPGet.Path))
		g.Expect(err).NotTo(HaveOccurred())
		defer res.Body.Close()
		g.Expect(res.StatusCode).To(Equal(http.StatusOK))
	}).WithTimeout(timeout).WithPolling(200 * time.Millisecond).Should(Succeed())
	return p
}

func (p *provider) running() bool {
	out, err := exec.Command("docker", "inspect", "--format", "{{.State.Running}}", p.container).Output()
	return err == nil && strings.TrimSpace(string(out)) == "true"
}

// dockerRunArgs are docker run's flags for the pod spec: user, groups and
// security context, and the volumes (host folders by volume name).
func dockerRunArgs(t *testing.T, d *appsv1.Deployment, name string, volumes map[string]string) []string {
	t.Helper()
	g := NewWithT(t)
	pod := d.Spec.Template.Spec
	g.Expect(pod.Containers).To(HaveLen(1))
	c := pod.Containers[0]
	g.Expect(c.Name).To(Equal("manager"))
	sc := c.SecurityContext
	g.Expect(sc).NotTo(BeNil())
	g.Expect(sc.RunAsUser).NotTo(BeNil())
	g.Expect(pod.SecurityContext.RunAsNonRoot).To(Equal(ptr.To(true)))
	g.Expect(*sc.RunAsUser).NotTo(BeZero())
	args := []string{"run", "-d", "--name", name, "--network", "host",
		"--user", fmt.Sprintf("%d:%d", *sc.RunAsUser, ptr.Deref(sc.RunAsGroup, *sc.RunAsUser))}
	for _, gid := range pod.SecurityContext.SupplementalGroups {
		args = append(args, "--group-add", strconv.FormatInt(gid, 10))
	}
	if ptr.Deref(sc.ReadOnlyRootFilesystem, false) {
		args = append(args, "--read-only")
	}
	if sc.Capabilities != nil && slices.Contains(sc.Capabilities.Drop, "ALL") {
		args = append(args, "--cap-drop", "ALL")
	}
	if !ptr.Deref(sc.AllowPrivilegeEscalation, true) {
		args = append(args, "--security-opt", "no-new-privileges")
	}
	g.Expect(ptr.Deref(sc.Privileged, false)).To(BeFalse())
	byName := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		byName[v.Name] = v
	}
	for _, m := range c.VolumeMounts {
		v, ok := byName[m.Name]
		g.Expect(ok).To(BeTrue(), "volume %s", m.Name)
		switch {
		case v.EmptyDir != nil:
			// An emptyDir is a fresh folder every user may write, as the
			// kubelet makes it (a bind mount: not every Engine honours
			// --tmpfs's mode).
			dir := t.TempDir()
			g.Expect(os.Chmod(dir, 0o777)).To(Succeed())
			args = append(args, "-v", dir+":"+m.MountPath)
		default:
			src, ok := volumes[m.Name]
			g.Expect(ok).To(BeTrue(), "no host folder for volume %s", m.Name)
			if v.HostPath != nil {
				g.Expect(src).To(Equal(v.HostPath.Path))
			}
			mode := ""
			if m.ReadOnly {
				mode = ":ro"
			}
			args = append(args, "-v", src+":"+m.MountPath+mode)
		}
	}
	return args
}

// webhookDenied is how the apiserver reports a webhook's refusal.
const webhookDenied = "admission webhook"

// checkInfrastructure: a docker MonolithCluster gets its load balancer
// container from the Engine behind the mounted socket, and the webhook
// refuses a MonolithCluster with a malformed node CIDR.
func (p *provider) checkInfrastructure(t *testing.T, socketGID uint32) {
	g := NewWithT(t)
	ctx := t.Context()
	g.Expect(p.deployment.Spec.Template.Spec.SecurityContext.SupplementalGroups).To(ContainElement(int64(socketGID)),
		"the socket's group is a supplementary group of the manager")
	ns, err := p.env.CreateNamespace(ctx, "image")
	g.Expect(err).NotTo(HaveOccurred())
	n := ns.Name

	bad := &infrav1.MonolithCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: n, Name: "bad"},
		Spec: infrav1.MonolithClusterSpec{Backend: infrav1.ClusterBackend{
			InMemory: &infrav1.InMemoryClusterBackend{NodeCIDR: "not-a-cidr"}}},
	}
	g.Expect(p.env.Client.Create(ctx, bad)).To(MatchError(ContainSubstring(webhookDenied)))

	dc, err := client.New(client.FromEnv)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = dc.Close() })
	network := "capim-" + n
	t.Cleanup(func() {
		// Whatever happened, leave no container or network on the host:
		// the cluster's containers carry the docker backend's labels.
		ctx := context.Background()
		res, err := dc.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: client.Filters{}.
			Add("label", infrav1.DockerLabelClusterNamespace+"="+n, infrav1.DockerLabelClusterName+"=c")})
		if err == nil {
			for _, c := range res.Items {
				_, _ = dc.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
			}
		}
		_, _ = dc.NetworkRemove(ctx, network, client.NetworkRemoveOptions{})
	})
	cluster := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: n, Name: "c"},
		Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
			APIGroup: infrav1.GroupVersion.Group, Kind: "MonolithCluster", Name: "c"}},
	}
	g.Expect(p.env.Client.Create(ctx, cluster)).To(Succeed())
	mc := &infrav1.MonolithCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: n, Name: "c", Labels: map[string]string{clusterv1.ClusterNameLabel: "c"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: "c", UID: cluster.UID}}},
		Spec: infrav1.MonolithClusterSpec{Backend: infrav1.ClusterBackend{Docker: &infrav1.DockerClusterBackend{
			Network: network, LoadBalancerImage: testLBImage}}},
	}
	g.Expect(p.env.Client.Create(ctx, mc)).To(Succeed())
	g.Eventually(func(g Gomega) {
		if !p.running() {
			StopTrying("the container exited").Now()
		}
		g.Expect(p.env.Client.Get(ctx, crclient.ObjectKeyFromObject(mc), mc)).To(Succeed())
		g.Expect(mc.Status.Initialization.Provisioned).To(Equal(ptr.To(true)))
		g.Expect(conditions.IsTrue(mc, infrav1.LoadBalancerAvailableCondition)).To(BeTrue())
	}).WithTimeout(2 * timeout).WithPolling(500 * time.Millisecond).Should(Succeed())
	res, err := dc.ContainerList(ctx, client.ContainerListOptions{Filters: client.Filters{}.
		Add("label", infrav1.DockerLabelClusterNamespace+"="+n, infrav1.DockerLabelClusterName+"=c")})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Items).To(HaveLen(1), "the load balancer container runs on the Engine")

	// Deleting it goes through the container's Engine access too.
	g.Expect(p.env.Client.Delete(ctx, mc)).To(Succeed())
	g.Eventually(func(g Gomega) {
		res, err := dc.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: client.Filters{}.
			Add("label", infrav1.DockerLabelClusterNamespace+"="+n, infrav1.DockerLabelClusterName+"=c")})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res.Items).To(BeEmpty())
	}).WithTimeout(timeout).WithPolling(500 * time.Millisecond).Should(Succeed())
}

// checkIPAM: a pool's addresses are counted, and the webhook refuses a pool
// of something that is no address.
func (p *provider) checkIPAM(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns, err := p.env.CreateNamespace(ctx, "image")
	g.Expect(err).NotTo(HaveOccurred())
	bad := &ipamv1alpha1.MonolithIPPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "bad"},
		Spec:       ipamv1alpha1.IPPoolSpec{Addresses: []string{"not-an-address"}, Prefix: 24},
	}
	g.Expect(p.env.Client.Create(ctx, bad)).To(MatchError(ContainSubstring(webhookDenied)))
	pool := &ipamv1alpha1.MonolithIPPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "pool"},
		Spec:       ipamv1alpha1.IPPoolSpec{Addresses: []string{"10.0.0.10-10.0.0.19"}, Prefix: 24},
	}
	g.Expect(p.env.Client.Create(ctx, pool)).To(Succeed())
	g.Eventually(func(g Gomega) {
		if !p.running() {
			StopTrying("the container exited").Now()
		}
		g.Expect(p.env.Client.Get(ctx, crclient.ObjectKeyFromObject(pool), pool)).To(Succeed())
		g.Expect(pool.Status.IPAddresses).NotTo(BeNil())
		g.Expect(pool.Status.IPAddresses.Total).To(BeEquivalentTo(10))
		g.Expect(pool.Status.IPAddresses.Free).To(BeEquivalentTo(10))
	}).WithTimeout(timeout).WithPolling(200 * time.Millisecond).Should(Succeed())
}

// checkRuntimeExtension: the hooks answer Cluster API's discovery over the
// webhook port with the mounted certificate, and the container registered
// its ExtensionConfig, owned by the bundle's ClusterRole.
func (p *provider) checkRuntimeExtension(t *testing.T) {
	g := NewWithT(t)
	req := &runtimehooksv1.DiscoveryRequest{}
	req.SetGroupVersionKind(runtimehooksv1.GroupVersion.WithKind("DiscoveryRequest"))
	body, err := json.Marshal(req)
	g.Expect(err).NotTo(HaveOccurred())
	// The apiserver's trust in the serving certificate, as core's would be.
	roots := x509.NewCertPool()
	g.Expect(roots.AppendCertsFromPEM(p.env.WebhookInstallOptions.LocalServingCAData)).To(BeTrue())
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: roots, MinVersion: tls.VersionTLS12}}}
	url := "https://" + p.webhook + "/hooks.runtime.cluster.x-k8s.io/v1alpha1/discovery"
	res, err := hc.Post(url, "application/json", bytes.NewReader(body))
	g.Expect(err).NotTo(HaveOccurred())
	defer res.Body.Close()
	g.Expect(res.StatusCode).To(Equal(http.StatusOK))
	resp := &runtimehooksv1.DiscoveryResponse{}
	g.Expect(json.NewDecoder(res.Body).Decode(resp)).To(Succeed())
	g.Expect(resp.Status).To(Equal(runtimehooksv1.ResponseStatusSuccess))
	g.Expect(resp.Handlers).To(ContainElement(HaveField("Name", "before-cluster-create")))
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(runtimev1.GroupVersion.WithKind("ExtensionConfigList"))
	// The CRD is Cluster API core's: envtest installs it.
	g.Eventually(func(g Gomega) {
		g.Expect(p.env.Client.List(t.Context(), list)).To(Succeed())
		g.Expect(list.Items).To(ConsistOf(And(
			HaveField("Name", "monolith"),
			HaveField("OwnerReferences", ConsistOf(And(
				HaveField("Kind", "ClusterRole"),
				HaveField("Name", p.namespace+"-runtimeext-self-registration")))),
			HaveField("Labels", HaveKeyWithValue("cluster.x-k8s.io/provider", "runtime-extension-monolith")),
		)))
	}).WithTimeout(timeout).WithPolling(200 * time.Millisecond).Should(Succeed())
}
