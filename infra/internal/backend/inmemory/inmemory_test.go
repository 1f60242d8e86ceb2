package inmemory_test

import (
	"context"
	"net/netip"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/infra/internal/backend"
	"github.com/capi-monolith/capi-monolith/infra/internal/backend/inmemory"
	"github.com/capi-monolith/capi-monolith/test/kubeadmdata"
)

var cluster = backend.ClusterRef{Namespace: "ns", Name: "c"}

func nodeSpec(name string, cidr string) backend.NodeSpec {
	return backend.NodeSpec{
		Machine: backend.MachineRef{Cluster: cluster, Name: name},
		Cluster: v1alpha1.ClusterBackend{InMemory: &v1alpha1.InMemoryClusterBackend{NodeCIDR: cidr}},
		Backend: v1alpha1.MachineBackend{InMemory: &v1alpha1.InMemoryMachineBackend{}},
	}
}

func internalIP(n backend.Node) string {
	for _, a := range n.Addresses {
		if a.Type == clusterv1.MachineInternalIP {
			return a.Address
		}
	}
	return ""
}

func TestTheEndpointIsTheFirstAddressOfTheNodeCIDR(t *testing.T) {
	g := NewWithT(t)
	b := inmemory.New(inmemory.Options{})
	s, err := b.ReconcileCluster(context.Background(), backend.ClusterSpec{Cluster: cluster,
		Backend: v1alpha1.ClusterBackend{InMemory: &v1alpha1.InMemoryClusterBackend{NodeCIDR: "10.9.0.0/24"}}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.Endpoint).To(Equal(clusterv1.APIEndpoint{Host: "10.9.0.1", Port: 6443}))

	s, err = b.ReconcileCluster(context.Background(), backend.ClusterSpec{Cluster: cluster,
		Backend: v1alpha1.ClusterBackend{InMemory: &v1alpha1.InMemoryClusterBackend{}}, Endpoint: clusterv1.APIEndpoint{Host: "api.example", Port: 443}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.Endpoint).To(Equal(clusterv1.APIEndpoint{Host: "api.example", Port: 443}), "an endpoint in the spec is kept")

	_, err = b.ReconcileCluster(context.Background(), backend.ClusterSpec{Cluster: cluster,
		Backend: v1alpha1.ClusterBackend{InMemory: &v1alpha1.InMemoryClusterBackend{NodeCIDR: "10.9.0.0/31"}}})
	g.Expect(err).To(MatchError(ContainSubstring("has room for no node")))
}

func TestNodesKeepTheirAddressAndProviderIDAcrossARestart(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	first := inmemory.New(inmemory.Options{})
	a, err := first.EnsureNode(ctx, nodeSpec("m1", "10.9.0.0/24"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(a.Provisioned).To(BeTrue())
	g.Expect(a.ProviderID).To(Equal("inmemory://ns/m1"))
	ip := netip.MustParseAddr(internalIP(a))
	g.Expect(netip.MustParsePrefix("10.9.0.0/24").Contains(ip)).To(BeTrue())
	g.Expect(ip).NotTo(BeElementOf(netip.MustParseAddr("10.9.0.0"), netip.MustParseAddr("10.9.0.1"), netip.MustParseAddr("10.9.0.255")),
		"network, endpoint and broadcast are never a node's")

	restarted := inmemory.New(inmemory.Options{})
	b, err := restarted.EnsureNode(ctx, nodeSpec("m1", "10.9.0.0/24"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(b).To(Equal(a))
}

func TestNodesOfOneClusterNeverShareAnAddress(t *testing.T) {
	g := NewWithT(t)
	b := inmemory.New(inmemory.Options{})
	seen := map[string]string{}
	// 253 usable addresses for 253 nodes: every hash collision must probe on.
	for i := range 253 {
		name := "m" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		n, err := b.EnsureNode(context.Background(), nodeSpec(name, "10.9.0.0/24"))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(seen).NotTo(HaveKey(internalIP(n)))
		seen[internalIP(n)] = name
	}
	_, err := b.EnsureNode(context.Background(), nodeSpec("one-too-many", "10.9.0.0/24"))
	g.Expect(err).To(MatchError(ContainSubstring("is full")))
}

func TestStaticAddressesWinOverTheNodeCIDR(t *testing.T) {
	g := NewWithT(t)
	spec := nodeSpec("m", "")
	spec.StaticAddresses = []backend.StaticAddress{{Address: netip.MustParseAddr("192.168.1.7"), Prefix: 24}}
	n, err := inmemory.New(inmemory.Options{}).EnsureNode(context.Background(), spec)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(internalIP(n)).To(Equal("192.168.1.7"))
}

func TestProvisioningDelayIsSimulated(t *testing.T) {
	g := NewWithT(t)
	now := time.Unix(1000, 0)
	b := inmemory.New(inmemory.Options{Now: func() time.Time { return now }})
	spec := nodeSpec("m", "")
	spec.Backend.InMemory.ProvisioningDelay = &metav1.Duration{Duration: 10 * time.Second}
	n, err := b.EnsureNode(context.Background(), spec)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n.Provisioned).To(BeFalse())
	now = now.Add(10 * time.Second)
	n, err = b.EnsureNode(context.Background(), spec)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n.Provisioned).To(BeTrue())
}

func TestBootstrapIsCancelledWithItsContextAndRefusesEmptyData(t *testing.T) {
	g := NewWithT(t)
	b := inmemory.New(inmemory.Options{})
	spec := nodeSpec("m", "")
	spec.Backend.InMemory.BootstrapDelay = &metav1.Duration{Duration: time.Hour}
	_, err := b.EnsureNode(context.Background(), spec)
	g.Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var progress []string
	go func() {
		done <- b.Bootstrap(ctx, spec.Machine, backend.BootstrapData{Value: []byte(kubeadmdata.JoinWorker), Format: "cloud-config"}, func(p string) { progress = append(progress, p) })
	}()
	cancel()
	g.Eventually(done, 5*time.Second).Should(Receive(MatchError(context.Canceled)))
	g.Expect(progress).To(ConsistOf(ContainSubstring("Running kubeadm join (simulated")))

	g.Expect(b.Bootstrap(context.Background(), spec.Machine, backend.BootstrapData{}, func(string) {})).To(MatchError("bootstrap data is empty"))
}

func TestListNodesNamesTheClustersNodesUntilDeleted(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	b := inmemory.New(inmemory.Options{})
	other := backend.ClusterRef{Namespace: "ns", Name: "other"}
	for _, spec := range []backend.NodeSpec{nodeSpec("a", "10.0.0.0/24"), nodeSpec("b", "10.0.0.0/24")} {
		_, err := b.EnsureNode(ctx, spec)
		g.Expect(err).NotTo(HaveOccurred())
	}
	elsewhere := nodeSpec("x", "10.1.0.0/24")
	elsewhere.Machine.Cluster = other
	_, err := b.EnsureNode(ctx, elsewhere)
	g.Expect(err).NotTo(HaveOccurred())

	g.Expect(b.ListNodes(ctx, cluster)).To(ConsistOf(
		backend.MachineRef{Cluster: cluster, Name: "a"}, backend.MachineRef{Cluster: cluster, Name: "b"}))
	g.Expect(b.DeleteNode(ctx, backend.MachineRef{Cluster: cluster, Name: "a"})).To(Succeed())
	g.Expect(b.ListNodes(ctx, cluster)).To(ConsistOf(backend.MachineRef{Cluster: cluster, Name: "b"}))
	g.Expect(b.ListNodes(ctx, other)).To(ConsistOf(elsewhere.Machine))
}

func TestANodeIsPlacedInItsFailureDomainAndStaysThere(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	b := inmemory.New(inmemory.Options{})
	spec := nodeSpec("m1", "10.9.0.0/24")
	spec.FailureDomain = "fd-a"
	n, err := b.EnsureNode(ctx, spec)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n.FailureDomain).To(Equal("fd-a"))

	spec.FailureDomain = "fd-b"
	n, err = b.EnsureNode(ctx, spec)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n.FailureDomain).To(Equal("fd-a"), "a node does not move")

	g.Expect(b.DeleteNode(ctx, spec.Machine)).To(Succeed())
	n, err = b.EnsureNode(ctx, spec)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n.FailureDomain).To(Equal("fd-b"), "a new node goes where its spec says")

	other := nodeSpec("m2", "10.9.0.0/24")
	n, err = b.EnsureNode(ctx, other)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n.FailureDomain).To(BeEmpty())
}

// Only kubeadm data whose configuration parses counts as bootstrapped:
// the backend simulates kubeadm and nothing else (issue 28: a well-formed
// cloud-config holding no kubeadm configuration made the machine Ready).
func TestBootstrapRunsOnlyKubeadmDataThatParses(t *testing.T) {
	tests := []struct {
		name, data, format string
		// want is the error Bootstrap wraps, nil for data it runs.
		want error
		// message is part of the error's message.
		message string
	}{
		{name: "a kubeadm join runs", data: kubeadmdata.JoinWorker, format: "cloud-config"},
		{name: "a cloud-config writing a harmless file and echoing is unsupported",
			data: "#cloud-config\nwrite_files:\n- path: /etc/motd\n  content: hello\nruncmd:\n- echo hello\n", format: "cloud-config",
			want: backend.ErrUnsupportedBootstrapData, message: "runs only kubeadm bootstrap data"},
		{name: "an empty cloud-config is unsupported", data: "#cloud-config\n", format: "cloud-config",
			want: backend.ErrUnsupportedBootstrapData, message: "no kubeadm InitConfiguration or JoinConfiguration in the cloud-config data"},
		{name: "a shell script is unsupported", data: "#!/bin/sh\necho hello\n", format: "cloud-config",
			want: backend.ErrUnsupportedBootstrapData, message: "not a cloud-config"},
		{name: "Ignition without kubeadm is unsupported", data: `{"ignition":{"version":"3.4.0"}}`, format: "ignition",
			want: backend.ErrUnsupportedBootstrapData, message: "no kubeadm InitConfiguration or JoinConfiguration in the ignition data"},
		{name: "a cloud-config that is not YAML is invalid", data: "#cloud-config\nwrite_files: [\n", format: "cloud-config",
			want: backend.ErrInvalidBootstrapData, message: "cloud-config is not YAML"},
		{name: "a broken encoding is invalid", data: "#cloud-config\nwrite_files:\n- path: /x\n  encoding: b64\n  content: '!!'\n", format: "cloud-config",
			want: backend.ErrInvalidBootstrapData, message: "failed to decode write_files /x"},
		{name: "a kubeadm configuration that does not parse is invalid",
			data:   "#cloud-config\nwrite_files:\n- path: /run/kubeadm/kubeadm.yaml\n  content: |\n    apiVersion: kubeadm.k8s.io/v1beta4\n    kind: JoinConfiguration\n    nodeRegistration: 7\n",
			format: "cloud-config", want: backend.ErrInvalidBootstrapData, message: "JoinConfiguration"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			b := inmemory.New(inmemory.Options{})
			spec := nodeSpec("m", "")
			_, err := b.EnsureNode(context.Background(), spec)
			g.Expect(err).NotTo(HaveOccurred())
			err = b.Bootstrap(context.Background(), spec.Machine, backend.BootstrapData{Value: []byte(tt.data), Format: tt.format}, func(string) {})
			if tt.want == nil {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(tt.want))
			g.Expect(err).To(MatchError(ContainSubstring(tt.message)))
		})
	}
}
