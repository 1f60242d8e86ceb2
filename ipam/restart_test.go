package ipam_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/capi-monolith/capi-monolith/test/managertest"
)

// ipamRequests counts a client's requests to the ipam.cluster.x-k8s.io
// group: writes, and reads of one object (which only the uncached reader
// makes; the cache lists and watches).
type ipamRequests struct {
	mu           sync.Mutex
	writes       []string
	objectReads  []string
	roundTripper http.RoundTripper
}

func (c *ipamRequests) RoundTrip(req *http.Request) (*http.Response, error) {
	const prefix = "/apis/ipam.cluster.x-k8s.io/"
	if path := req.URL.Path; strings.HasPrefix(path, prefix) {
		line := req.Method + " " + path
		c.mu.Lock()
		switch {
		case req.Method != http.MethodGet:
			c.writes = append(c.writes, line)
		case req.URL.Query().Get("watch") == "" && namesAnObject(strings.TrimPrefix(path, prefix)):
			c.objectReads = append(c.objectReads, line)
		}
		c.mu.Unlock()
	}
	return c.roundTripper.RoundTrip(req)
}

// namesAnObject tells whether a path below the group (version/[namespaces/
// ns/]resource[/name[/subresource]]) names one object.
func namesAnObject(rest string) bool {
	parts := strings.Split(strings.Trim(rest, "/"), "/")
	if len(parts) >= 3 && parts[1] == "namespaces" {
		parts = parts[2:]
		return len(parts) >= 3
	}
	return len(parts) >= 3
}

func (c *ipamRequests) snapshot() (writes, objectReads []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.writes...), append([]string(nil), c.objectReads...)
}

func claimReconciles(g Gomega) float64 {
	families, err := ctrlmetrics.Registry.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	var sum float64
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == "ipaddressclaim" {
					sum += m.GetCounter().GetValue()
				}
			}
		}
	}
	return sum
}

func TestRestartedManagerWritesNothingForBoundClaimsAndServesANewOne(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	stop := startIPAM(t, inNamespace(ns))
	createPool(t, ns, "restart", spec(24, "10.140.0.0/24"))
	bound := createClaims(t, ns, "bound", "restart", 40)
	before := expectDistinct(t, bound)
	stop()

	counted := &ipamRequests{}
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		counted.roundTripper = rt
		return counted
	})
	opts := managertest.Options("ipam")
	opts.WatchNamespace = ns
	reconciled := claimReconciles(g)
	managertest.Start(t, cfg, opts, managertest.IPAM())

	fresh := createClaim(t, ns, "fresh", "restart")
	freshAddress := addressOf(t, fresh).Spec.Address
	g.Expect(before).NotTo(HaveKey(freshAddress), "the new claim gets an address no bound claim has")
	// Every bound claim is still reconciled once after the restart (later,
	// through the startup backlog): wait for those reconciles before
	// counting what they wrote.
	g.Eventually(func(g Gomega) {
		g.Expect(claimReconciles(g) - reconciled).To(BeNumerically(">=", len(bound)+1))
	}, timeout).Should(Succeed())

	writes, reads := counted.snapshot()
	for _, w := range writes {
		g.Expect(w).NotTo(ContainSubstring("/bound-"), "a bound claim or its IPAddress written after the restart")
	}
	records := 0
	for _, w := range writes {
		if strings.HasPrefix(w, http.MethodPost+" ") && strings.HasSuffix(w, "/monolithipallocations") {
			records++
		}
	}
	g.Expect(records).To(Equal(1), "one allocation record, the new claim's: %v", writes)
	g.Expect(reads).To(BeEmpty(), "a restart reads the ipam objects from its cache only")
	after := expectDistinct(t, bound)
	g.Expect(after).To(Equal(before), "every bound claim keeps its address")
}
