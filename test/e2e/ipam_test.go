package e2e

import (
	"net/netip"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The ipam flavor: the infra module claims one address per machine from a
// MonolithIPPool, the ipam module of the same process fulfils the claims,
// and deleting the cluster gives every address back.
var _ = Describe("A cluster from cluster-template-ipam.yaml", Ordered, func() {
	const name = "ipam"
	var namespace string
	pool := netip.MustParsePrefix("10.128.10.0/24")

	BeforeAll(func(ctx SpecContext) {
		namespace = createNamespace(ctx, "e2e-ipam")
		vars := templateVars(namespace, name)
		vars["MONOLITH_IPAM_ADDRESSES"] = pool.String()
		apply(ctx, render("cluster-template-ipam.yaml", vars))
	})

	It("should give every machine an address from the pool", func(ctx SpecContext) {
		expectClusterProvisioned(ctx, namespace, name)
		machines := expectMachines(ctx, namespace, name, 2)
		seen := map[netip.Addr]bool{}
		for _, m := range machines {
			infra, err := get(ctx, monolithMachineGVK, namespace, m.Spec.InfrastructureRef.Name)
			Expect(err).NotTo(HaveOccurred())
			addrs, _, _ := unstructured.NestedSlice(infra.Object, "status", "addresses")
			var inPool []netip.Addr
			for _, a := range addrs {
				s, _ := a.(map[string]any)["address"].(string)
				if ip, err := netip.ParseAddr(s); err == nil && pool.Contains(ip) {
					inPool = append(inPool, ip)
				}
			}
			Expect(inPool).To(HaveLen(1), "MonolithMachine %s addresses %v", infra.GetName(), addrs)
			Expect(seen).NotTo(HaveKey(inPool[0]), "no address is handed out twice")
			seen[inPool[0]] = true
		}
		Eventually(func() (int64, error) {
			return poolUsed(ctx, namespace, name+"-nodes")
		}).WithTimeout(provisionTimeout).WithPolling(poll).Should(BeEquivalentTo(2))
		addresses, err := list(ctx, ipAddressGVK, namespace)
		Expect(err).NotTo(HaveOccurred())
		Expect(addresses).To(HaveLen(2))
	})

	It("should return every address to the pool when the cluster is deleted", func(ctx SpecContext) {
		deleteClusterAndWait(ctx, namespace, name)
		Eventually(func() (int64, error) {
			return poolUsed(ctx, namespace, name+"-nodes")
		}).WithTimeout(deleteTimeout).WithPolling(poll).Should(BeZero())
	})
})

func poolUsed(ctx SpecContext, namespace, name string) (int64, error) {
	p, err := get(ctx, monolithIPPoolGVK, namespace, name)
	if err != nil {
		return -1, err
	}
	used, found, err := unstructured.NestedInt64(p.Object, "status", "ipAddresses", "used")
	if err != nil || !found {
		return -1, err
	}
	return used, nil
}
