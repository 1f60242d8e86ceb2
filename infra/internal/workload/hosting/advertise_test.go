package hosting_test

import (
	"context"
	"net"
	"net/netip"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/certs"
	"sigs.k8s.io/cluster-api/util/kubeconfig"
	"sigs.k8s.io/cluster-api/util/secret"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/hosting"
	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
)

// clusterCA makes cluster's CA Secret as the control plane provider does,
// returns a reader holding it and a client config for the cluster's
// endpoint, which dials dialTo whatever the endpoint's host resolves to.
func clusterCA(g Gomega, cluster client.ObjectKey, endpoint clusterv1.APIEndpoint, address string) (client.Reader, *rest.Config) {
	certificates := secret.NewCertificatesForInitialControlPlane(nil)
	g.Expect(certificates.Generate()).To(Succeed())
	ca := certificates.GetByPurpose(secret.ClusterCA)
	reader := fake.NewClientBuilder().WithObjects(ca.AsSecret(cluster, metav1.OwnerReference{})).Build()
	cert, err := certs.DecodeCertPEM(ca.KeyPair.Cert)
	g.Expect(err).NotTo(HaveOccurred())
	key, err := certs.DecodePrivateKeyPEM(ca.KeyPair.Key)
	g.Expect(err).NotTo(HaveOccurred())
	server := "https://" + net.JoinHostPort(endpoint.Host, strconv.Itoa(int(endpoint.Port)))
	cfg, err := kubeconfig.New(cluster.Name, server, cert, key)
	g.Expect(err).NotTo(HaveOccurred())
	restCfg, err := clientcmd.NewDefaultClientConfig(*cfg, nil).ClientConfig()
	g.Expect(err).NotTo(HaveOccurred())
	restCfg.Timeout = 10 * time.Second
	restCfg.Dial = dialTo(address)
	return reader, restCfg
}

// dialTo dials address whatever the client asks for.
func dialTo(address string) func(ctx context.Context, network, _ string) (net.Conn, error) {
	return func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, address)
	}
}

var configMapsResource = store.Resource{Resource: "configmaps", Namespaced: true}

// With an advertised host, the listeners open on the listen address (here
// every interface) and the endpoint names the advertised host, which the
// serving certificate holds: a client dialling the name verifies it.
func TestAnAdvertisedHostIsTheEndpointAndTheCertificatesName(t *testing.T) {
	g := NewWithT(t)
	r := freeRange(g, 2)
	const name = "workload.capi-monolith-system.svc"
	cluster := client.ObjectKey{Namespace: "ns", Name: "a"}
	endpoint := clusterv1.APIEndpoint{Host: name, Port: int32(r.First)}
	secrets, cfg := clusterCA(g, cluster, endpoint, "127.0.0.1:"+strconv.Itoa(r.First))

	h, err := hosting.New(hosting.Options{
		Address: netip.MustParseAddr("0.0.0.0"), AdvertiseHost: name, Ports: r, Secrets: secrets,
	})
	g.Expect(err).NotTo(HaveOccurred())
	defer h.Remove(cluster)
	got, err := h.Serve(t.Context(), cluster, clusterv1.APIEndpoint{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(endpoint))
	g.Expect(h.Hosts(endpoint)).To(BeTrue())
	g.Expect(h.Hosts(clusterv1.APIEndpoint{Host: "0.0.0.0", Port: endpoint.Port})).To(BeFalse())
	g.Expect(h.Hosts(clusterv1.APIEndpoint{Host: "127.0.0.1", Port: endpoint.Port})).To(BeFalse())

	cs, err := kubernetes.NewForConfig(cfg)
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) {
		_, err := cs.CoreV1().Namespaces().Get(t.Context(), "kube-system", metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
	}, 10*time.Second).Should(Succeed(), "the certificate names %s", name)

	// Another name is not in the certificate.
	other := rest.CopyConfig(cfg)
	other.Host = "https://other.example:" + strconv.Itoa(r.First)
	cs, err = kubernetes.NewForConfig(other)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = cs.CoreV1().Namespaces().Get(t.Context(), "kube-system", metav1.GetOptions{})
	g.Expect(err).To(MatchError(ContainSubstring("certificate is valid for")))
}

// An unspecified listen address needs an advertised host; an advertised
// host is an IP address clients can dial or a DNS name.
func TestAnUnspecifiedAddressNeedsAnAdvertisedHost(t *testing.T) {
	g := NewWithT(t)
	reader := fake.NewClientBuilder().Build()
	for _, a := range []string{"0.0.0.0", "::"} {
		_, err := hosting.New(hosting.Options{Address: netip.MustParseAddr(a), Secrets: reader})
		g.Expect(err).To(MatchError(ContainSubstring("advertised host is required")), a)
	}
	for _, bad := range []string{"0.0.0.0", "::", "Not_A_Name", "a..b", "-a.svc"} {
		_, err := hosting.New(hosting.Options{Address: netip.MustParseAddr("0.0.0.0"), AdvertiseHost: bad, Secrets: reader})
		g.Expect(err).To(HaveOccurred(), bad)
	}
	for _, good := range []string{"10.0.0.5", "fd00::5", "capi-monolith-infrastructure-workload.capi-monolith-infrastructure.svc", "localhost"} {
		_, err := hosting.New(hosting.Options{Address: netip.MustParseAddr("0.0.0.0"), AdvertiseHost: good, Secrets: reader})
		g.Expect(err).NotTo(HaveOccurred(), good)
	}
}
