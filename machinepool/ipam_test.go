package machinepool_test

import (
	"net/netip"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	infrav1 "github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/infra/machines"
	ipamv1alpha1 "github.com/capi-monolith/capi-monolith/ipam/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/test/managertest"
)

// Instances claim their addresses exactly as single MonolithMachines do
// (infra/addressclaims): one claim per pool, <instance>-<index>, owned by
// the instance and held until its node is gone.
func TestInstancesClaimAddressesFromIPPools(t *testing.T) {
	start(t, managertest.IPAM())
	group := ipamv1alpha1.GroupVersion.Group
	opts := inMemory()
	opts.instance.AddressesFromPools = []corev1.TypedLocalObjectReference{{APIGroup: &group, Kind: ipamv1alpha1.MonolithIPPoolKind, Name: "nodes"}}
	f := newFixture(t, opts)
	g := NewWithT(t)
	g.Expect(env.Client.Create(ctx, &ipamv1alpha1.MonolithIPPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "nodes"},
		Spec:       ipamv1alpha1.IPPoolSpec{Addresses: []string{"10.20.0.10-10.20.0.19"}, Prefix: 24},
	})).To(Succeed())
	inPool := netip.MustParsePrefix("10.20.0.0/24")

	instances := scaleAndGet(t, f, 2)
	claims := map[string]bool{}
	for _, mm := range instances {
		claim := &ipamv1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: machines.ClaimName(mm.Name, 0)}}
		get(g, claim)
		claims[claim.Name] = true
		g.Expect(claim.OwnerReferences).To(ContainElement(And(HaveField("Kind", "MonolithMachine"), HaveField("Name", mm.Name),
			HaveField("Controller", ptr.To(true)))))
		g.Expect(claim.Finalizers).To(ContainElement(infrav1.ClaimFinalizer))
		address := &ipamv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: claim.Status.AddressRef.Name}}
		get(g, address)
		g.Expect(mm.Status.Addresses).To(ContainElement(clusterv1.MachineAddress{Type: clusterv1.MachineInternalIP, Address: address.Spec.Address}))
		g.Expect(inPool.Contains(netip.MustParseAddr(address.Spec.Address))).To(BeTrue())
	}
	g.Expect(claims).To(HaveLen(2))

	scaleAndGet(t, f, 0)
	g.Eventually(func(g Gomega) {
		list := &ipamv1.IPAddressClaimList{}
		g.Expect(env.Client.List(ctx, list, client.InNamespace(f.ns))).To(Succeed())
		g.Expect(list.Items).To(BeEmpty(), "the claims are released with the instances")
		addresses := &ipamv1.IPAddressList{}
		g.Expect(env.Client.List(ctx, addresses, client.InNamespace(f.ns))).To(Succeed())
		g.Expect(addresses.Items).To(BeEmpty())
	}, timeout, poll).Should(Succeed())
}
