package infra_test

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	infrav1 "github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/test/managertest"
)

// An IPAM provider binds a claim to an address it has just created; the
// machine's cache can show the bound claim before the address. Here the
// test is that provider and makes the gap as wide as it likes: the claim
// is bound to an address that does not exist yet, and the machine must
// provision once the address appears, with no other event to wake it.
func TestMachineUsesAnAddressCreatedAfterItsClaimWasBound(t *testing.T) {
	g := NewWithT(t)
	start(t, managertest.Infra())
	f := newFixture(t, nil)
	// A pool of another IPAM provider: nothing in this process serves it.
	pool := ipamv1.IPPoolReference{APIGroup: "ipam.example.com", Kind: "ExamplePool", Name: "p"}
	mm := f.machine(t, "m", nil, corev1.TypedLocalObjectReference{APIGroup: ptr.To(pool.APIGroup), Kind: pool.Kind, Name: pool.Name})

	claim := &ipamv1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "m-0"}}
	g.Eventually(func(g Gomega) { get(g, claim) }, timeout).Should(Succeed())

	// Bind first, to an address not created yet, and let the machine see it.
	claimPatch := client.MergeFrom(claim.DeepCopy())
	claim.Status.AddressRef = ipamv1.IPAddressReference{Name: "m-0"}
	conditions.Set(claim, metav1.Condition{Type: ipamv1.IPAddressClaimReadyCondition, Status: metav1.ConditionTrue, Reason: "Bound"})
	g.Expect(env.Client.Status().Patch(ctx, claim, claimPatch)).To(Succeed())
	g.Eventually(func(g Gomega) {
		get(g, mm)
		c := conditions.Get(mm, infrav1.IPAddressesClaimedCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		// The machine has seen the bound claim and looked for the address.
		g.Expect(c.Message).To(Equal("IPAddressClaim m-0: bound to IPAddress m-0, not found yet; Waiting for 1 of 1 IP addresses"))
	}, timeout).Should(Succeed())
	g.Expect(mm.Status.Initialization.Provisioned).To(BeNil())

	address := &ipamv1.IPAddress{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "m-0"},
		Spec: ipamv1.IPAddressSpec{
			ClaimRef: ipamv1.IPAddressClaimReference{Name: claim.Name},
			PoolRef:  pool,
			Address:  "10.20.0.7", Prefix: ptr.To[int32](24), Gateway: "10.20.0.1",
		},
	}
	g.Expect(env.Client.Create(ctx, address)).To(Succeed())
	g.Eventually(func(g Gomega) {
		get(g, mm)
		g.Expect(mm.Status.Initialization.Provisioned).To(Equal(ptr.To(true)))
		g.Expect(mm.Status.Addresses).To(ContainElement(clusterv1.MachineAddress{Type: clusterv1.MachineInternalIP, Address: "10.20.0.7"}))
		g.Expect(conditions.IsTrue(mm, infrav1.IPAddressesClaimedCondition)).To(BeTrue())
	}, timeout).Should(Succeed())
}
