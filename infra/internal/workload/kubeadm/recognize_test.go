package kubeadm

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"errors"
	"os"
	"testing"

	"github.com/blang/semver/v4"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/bootstrap/kubeadm/pkg/cloudinit"
	kubeadmtypes "sigs.k8s.io/cluster-api/bootstrap/kubeadm/pkg/types"
	"sigs.k8s.io/cluster-api/bootstrap/kubeadm/pkg/types/upstream"
	"sigs.k8s.io/cluster-api/util/secret"
)

// cabpkCloudConfig renders bootstrap data with CABPK's own cloud-init
// package, as its KubeadmConfig controller does for init, control-plane
// join and worker join (the uninitialized taint added to joins).
type cabpkCloudConfig struct {
	version semver.Version
	cc      *bootstrapv1.ClusterConfiguration
}

func newCABPK() *cabpkCloudConfig {
	return &cabpkCloudConfig{
		version: semver.MustParse("1.36.3"),
		cc: &bootstrapv1.ClusterConfiguration{
			ControlPlaneEndpoint: "c1.workload.local:6443",
			APIServer:            bootstrapv1.APIServer{CertSANs: []string{"localhost", "127.0.0.1"}},
		},
	}
}

func (r *cabpkCloudConfig) base() cloudinit.BaseUserData {
	return cloudinit.BaseUserData{
		KubernetesVersion:  r.version,
		PreKubeadmCommands: []string{"echo pre"},
		AdditionalFiles: []bootstrapv1.File{{
			Path: "/etc/extra.conf", Encoding: bootstrapv1.Base64, Content: base64.StdEncoding.EncodeToString([]byte("extra: true\n")),
		}},
	}
}

func (r *cabpkCloudConfig) init(t testing.TB) []byte {
	t.Helper()
	certs := secret.NewCertificatesForInitialControlPlane(r.cc)
	if err := certs.Generate(); err != nil {
		t.Fatal(err)
	}
	clusterData, err := kubeadmtypes.MarshalClusterConfigurationForVersion(r.cc, r.version, &upstream.AdditionalData{
		KubernetesVersion: ptr.To("v1.36.3"), ClusterName: ptr.To("c1"),
		PodSubnet: ptr.To("192.168.0.0/16"), ServiceSubnet: ptr.To("10.128.0.0/12"), DNSDomain: ptr.To("cluster.local"),
	})
	if err != nil {
		t.Fatal(err)
	}
	initData, err := kubeadmtypes.MarshalInitConfigurationForVersion(&bootstrapv1.InitConfiguration{
		NodeRegistration: bootstrapv1.NodeRegistrationOptions{
			Name:             "{{ ds.meta_data.local_hostname }}",
			KubeletExtraArgs: []bootstrapv1.Arg{{Name: "node-labels", Value: ptr.To("a=b, c=d")}, {Name: "eviction-hard", Value: ptr.To("nodefs.available<0%")}},
		},
	}, r.version)
	if err != nil {
		t.Fatal(err)
	}
	data, err := cloudinit.NewInitControlPlane(&cloudinit.ControlPlaneInput{
		BaseUserData: r.base(), Certificates: certs, ClusterConfiguration: clusterData, InitConfiguration: initData,
	})
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func (r *cabpkCloudConfig) join(t testing.TB, controlPlane bool) []byte {
	t.Helper()
	jc := &bootstrapv1.JoinConfiguration{
		NodeRegistration: bootstrapv1.NodeRegistrationOptions{
			Name:   "{{ ds.meta_data.local_hostname }}",
			Taints: ptr.To([]corev1.Taint{clusterv1.NodeUninitializedTaint}),
		},
		Discovery: bootstrapv1.Discovery{BootstrapToken: bootstrapv1.BootstrapTokenDiscovery{
			APIServerEndpoint: "c1.workload.local:6443", Token: "abcdef.0123456789abcdef", CACertHashes: []string{"sha256:00"},
		}},
	}
	if controlPlane {
		jc.ControlPlane = &bootstrapv1.JoinControlPlane{}
	}
	joinData, err := kubeadmtypes.MarshalJoinConfigurationForVersion(jc, r.version)
	if err != nil {
		t.Fatal(err)
	}
	var data []byte
	if controlPlane {
		certs := secret.NewControlPlaneJoinCerts(r.cc)
		if err := certs.Generate(); err != nil {
			t.Fatal(err)
		}
		data, err = cloudinit.NewJoinControlPlane(&cloudinit.ControlPlaneJoinInput{
			BaseUserData: r.base(), Certificates: certs, BootstrapToken: "abcdef.0123456789abcdef", JoinConfiguration: joinData,
		})
	} else {
		data, err = cloudinit.NewNode(&cloudinit.NodeInput{BaseUserData: r.base(), JoinConfiguration: joinData})
	}
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestRecognizeCABPKCloudConfig(t *testing.T) {
	g := NewWithT(t)
	r := newCABPK()
	initData, joinCP, joinWorker := r.init(t), r.join(t, true), r.join(t, false)
	g.Expect(string(initData)).To(HavePrefix("## template: jinja\n#cloud-config"))

	for _, tt := range []struct {
		name   string
		data   []byte
		format string
		want   Role
	}{
		{"init", initData, FormatCloudConfig, Init},
		{"control-plane join", joinCP, FormatCloudConfig, JoinControlPlane},
		{"worker join", joinWorker, FormatCloudConfig, JoinWorker},
		{"worker join, format guessed", joinWorker, "", JoinWorker},
	} {
		role, err := Recognize(tt.data, tt.format)
		g.Expect(err).NotTo(HaveOccurred(), tt.name)
		g.Expect(role).To(Equal(tt.want), tt.name)
	}

	b, err := Parse(initData, FormatCloudConfig)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(b.ClusterConfiguration).NotTo(BeNil())
	g.Expect(b.ClusterConfiguration.ControlPlaneEndpoint).To(Equal("c1.workload.local:6443"))
	g.Expect(b.ClusterConfiguration.APIServer.CertSANs).To(Equal([]string{"localhost", "127.0.0.1"}))
	g.Expect([]string{b.KubernetesVersion, b.ClusterName, b.PodSubnet, b.ServiceSubnet, b.DNSDomain}).
		To(Equal([]string{"v1.36.3", "c1", "192.168.0.0/16", "10.128.0.0/12", "cluster.local"}))
	g.Expect(b.NodeRegistration.Name).To(Equal("{{ ds.meta_data.local_hostname }}"))
	g.Expect(b.NodeRegistration.Taints).To(BeNil(), "kubeadm's default taint applies")
	g.Expect(b.NodeLabels()).To(Equal(map[string]string{"a": "b", "c": "d"}))

	b, err = Parse(joinWorker, FormatCloudConfig)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(b.ClusterConfiguration).To(BeNil())
	g.Expect(b.NodeRegistration.Taints).To(Equal(ptr.To([]corev1.Taint{clusterv1.NodeUninitializedTaint})))
	g.Expect(b.NodeLabels()).To(BeEmpty())
}

// What the inMemory backend is to do with bootstrap data: parse it, and
// Ensure the node it describes.
func TestBootstrapDataMakesTheCluster(t *testing.T) {
	g := NewWithT(t)
	tc := newTestCluster(t)
	ctx := context.Background()
	r := newCABPK()

	b, err := Parse(r.init(t), "")
	g.Expect(err).NotTo(HaveOccurred())
	c := Cluster{
		Name: b.ClusterName, ControlPlaneEndpoint: b.ClusterConfiguration.ControlPlaneEndpoint, KubernetesVersion: b.KubernetesVersion,
		PodSubnet: b.PodSubnet, ServiceSubnet: b.ServiceSubnet, ServiceDomain: b.DNSDomain, CACertPEM: testCA(t),
		ClusterConfiguration: b.ClusterConfiguration,
	}
	n := controlPlaneNode("cp-0", "10.0.0.10")
	n.Taints, n.Labels = b.NodeRegistration.Taints, b.NodeLabels()
	mustEnsure(t, tc, c, n)

	w, err := Parse(r.join(t, false), "")
	g.Expect(err).NotTo(HaveOccurred())
	worker := workerNode("w-0", "10.0.1.10")
	worker.Taints = w.NodeRegistration.Taints
	mustEnsure(t, tc, c, worker)

	cm := &corev1.ConfigMap{}
	g.Expect(tc.client.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "kubeadm-config"}, cm)).To(Succeed())
	cc, extra, err := kubeadmtypes.UnmarshalClusterConfiguration(cm.Data[clusterConfigurationKey])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cc.APIServer.CertSANs).To(Equal([]string{"localhost", "127.0.0.1"}), "kubeadm uploads the configuration it was given")
	g.Expect(extra.PodSubnet).To(Equal(ptr.To("192.168.0.0/16")))

	node := &corev1.Node{}
	g.Expect(tc.client.Get(ctx, client.ObjectKey{Name: "cp-0"}, node)).To(Succeed())
	g.Expect(node.Labels).To(And(HaveKeyWithValue("a", "b"), HaveKeyWithValue(LabelControlPlane, "")))
	g.Expect(node.Spec.Taints).To(ConsistOf(HaveField("Key", LabelControlPlane)))
	g.Expect(tc.client.Get(ctx, client.ObjectKey{Name: "w-0"}, node)).To(Succeed())
	g.Expect(node.Spec.Taints).To(ConsistOf(clusterv1.NodeUninitializedTaint))
}

func TestRecognizeIgnition(t *testing.T) {
	g := NewWithT(t)
	initData, err := os.ReadFile("testdata/ignition-init.json")
	g.Expect(err).NotTo(HaveOccurred())
	joinData, err := os.ReadFile("testdata/ignition-join-worker.json")
	g.Expect(err).NotTo(HaveOccurred())

	role, err := Recognize(initData, FormatIgnition)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(role).To(Equal(Init))
	b, err := Parse(initData, "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(b.Role).To(Equal(Init))
	g.Expect(b.ClusterConfiguration.ControlPlaneEndpoint).To(Equal("ign.example:6443"))
	g.Expect(b.ServiceSubnet).To(Equal("10.128.0.0/12"))

	b, err = Parse(joinData, FormatIgnition)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(b.Role).To(Equal(JoinWorker))
	g.Expect(b.NodeLabels()).To(Equal(map[string]string{"tier": "worker"}))
	g.Expect(b.NodeRegistration.Taints).To(Equal(ptr.To([]corev1.Taint{clusterv1.NodeUninitializedTaint})))
}

func TestRecognizeDecodesCloudInitEncodings(t *testing.T) {
	g := NewWithT(t)
	join := []byte("apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\ncontrolPlane: {}\n")
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	_, _ = w.Write(join)
	g.Expect(w.Close()).To(Succeed())
	data := "#cloud-config\nwrite_files:\n- path: /run/kubeadm/kubeadm-join-config.yaml\n  encoding: gz+b64\n  content: " +
		base64.StdEncoding.EncodeToString(gz.Bytes()) + "\n"
	role, err := Recognize([]byte(data), FormatCloudConfig)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(role).To(Equal(JoinControlPlane))
}

func TestRecognizeRefusesOtherData(t *testing.T) {
	for _, tt := range []struct {
		name, data, format string
		// malformed: the data cannot be read as its format (ErrMalformed);
		// else it reads well and holds no kubeadm configuration.
		malformed bool
	}{
		{name: "the hand-made bootstrap Secret's cloud-config", data: "#cloud-config\nwrite_files:\n- path: /run/cluster-api/bootstrap-success.complete\n  content: success\n", format: FormatCloudConfig},
		{name: "a harmless file and an echo", data: "#cloud-config\nwrite_files:\n- path: /etc/motd\n  content: hello\nruncmd:\n- echo hello\n", format: FormatCloudConfig},
		{name: "a shell script", data: "#!/bin/bash\nkubeadm init\n", format: FormatCloudConfig},
		{name: "nothing", data: "", format: ""},
		{name: "an empty cloud-config", data: "#cloud-config\n", format: FormatCloudConfig},
		{name: "cloud-config with other YAML files", data: "#cloud-config\nwrite_files:\n- path: /etc/x.yaml\n  content: |\n    apiVersion: v1\n    kind: ConfigMap\n", format: FormatCloudConfig},
		{name: "cloud-config that is not YAML", data: "#cloud-config\nwrite_files: [\n", format: FormatCloudConfig, malformed: true},
		{name: "Ignition without kubeadm", data: `{"ignition":{"version":"2.3.0"},"storage":{"files":[{"path":"/etc/motd","contents":{"source":"data:,hello"}}]}}`, format: FormatIgnition},
		{name: "Ignition that is not JSON", data: `{"ignition":`, format: FormatIgnition, malformed: true},
		{name: "JSON that is not Ignition", data: `{"kind":"InitConfiguration"}`, format: ""},
		{name: "an unknown format", data: "#cloud-config\n", format: "mime-multipart"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := Recognize([]byte(tt.data), tt.format)
			g.Expect(err).To(MatchError(ErrNotKubeadm))
			g.Expect(errors.Is(err, ErrMalformed)).To(Equal(tt.malformed), "malformed: %v", err)
			g.Expect(errors.Is(err, ErrTooLarge)).To(BeFalse())
		})
	}
}
