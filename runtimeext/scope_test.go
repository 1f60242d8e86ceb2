package runtimeext_test

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"

	"github.com/capi-monolith/capi-monolith/dev/ports"
	"github.com/capi-monolith/capi-monolith/runtimeext"
	rtxapi "github.com/capi-monolith/capi-monolith/runtimeext/api"
	"github.com/capi-monolith/capi-monolith/test/managertest"
)

// The module honours the manager's --watch-filter (and --namespace, through
// the same scope): over the real server, a held Cluster without the filter
// label gets the neutral answer and no Event; one with it is held, with an
// Event.
func TestHooksHonourTheWatchFilter(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns, err := env.CreateNamespace(ctx, "scope")
	g.Expect(err).NotTo(HaveOccurred())
	port, err := ports.One()
	g.Expect(err).NotTo(HaveOccurred())
	opts := managertest.Options()
	opts.WatchFilterValue = "mine"
	extOpts := runtimeext.DefaultOptions()
	extOpts.Registration.Name = ""
	stop, err := startManagerWithOptions(opts, port, env.WebhookInstallOptions.LocalServingCertDir, nil, runtimeext.New(extOpts))
	g.Expect(err).NotTo(HaveOccurred())
	defer stop()

	pool := x509.NewCertPool()
	g.Expect(pool.AppendCertsFromPEM(caPEM)).To(BeTrue())
	httpClient := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	// Hooks act only on Clusters that exist (package scope): made for real,
	// and sent as core sends them, with their UIDs.
	create := func(name string, labels map[string]string) *clusterv1.Cluster {
		c := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: name, Labels: labels,
			Annotations: map[string]string{rtxapi.HoldAnnotation: "BeforeClusterDelete"}},
			Spec: clusterv1.ClusterSpec{Paused: ptr.To(false), InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "MonolithCluster", Name: name}}}
		g.Expect(env.Client.Create(ctx, c)).To(Succeed())
		return c
	}
	call := func(cluster *clusterv1.Cluster) *runtimehooksv1.BeforeClusterDeleteResponse {
		req := &runtimehooksv1.BeforeClusterDeleteRequest{
			TypeMeta: metav1.TypeMeta{APIVersion: runtimehooksv1.GroupVersion.String(), Kind: "BeforeClusterDeleteRequest"},
			Cluster:  *cluster,
		}
		body, err := json.Marshal(req)
		g.Expect(err).NotTo(HaveOccurred())
		url := fmt.Sprintf("https://127.0.0.1:%d/hooks.runtime.cluster.x-k8s.io/v1alpha1/beforeclusterdelete/before-cluster-delete", port)
		resp, err := httpClient.Post(url, "application/json", bytes.NewReader(body))
		g.Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
		out := &runtimehooksv1.BeforeClusterDeleteResponse{}
		g.Expect(json.NewDecoder(resp.Body).Decode(out)).To(Succeed())
		return out
	}

	theirs := call(create("theirs", nil))
	g.Expect(theirs.Status).To(Equal(runtimehooksv1.ResponseStatusSuccess))
	g.Expect(theirs.RetryAfterSeconds).To(BeZero(), "a Cluster outside the watch filter is not held")

	// The manager's cache may not have the new Cluster yet: until then the
	// answer is a Failure (an unknown Cluster), never a neutral Success.
	mineCluster := create("mine", map[string]string{clusterv1.WatchLabel: "mine"})
	g.Eventually(func(g Gomega) {
		mine := call(mineCluster)
		g.Expect(mine.Status).To(Equal(runtimehooksv1.ResponseStatusSuccess))
		g.Expect(mine.RetryAfterSeconds).To(BeNumerically(">", 0), "a Cluster in scope is held")
	}).WithTimeout(10 * time.Second).Should(Succeed())

	// Events of one recorder are written in order: once the later call's
	// Event is there, the earlier one's would be too.
	g.Eventually(func() ([]string, error) { return events(ctx, ns.Name, "mine", "BeforeClusterDelete") }).
		WithTimeout(10 * time.Second).ShouldNot(BeEmpty())
	g.Expect(events(ctx, ns.Name, "theirs", "BeforeClusterDelete")).To(BeEmpty(), "no Event on a Cluster outside the scope")
}
