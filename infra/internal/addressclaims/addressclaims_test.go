package addressclaims_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/infra/internal/addressclaims"
)

func machine(uid string) *v1alpha1.MonolithMachine {
	return &v1alpha1.MonolithMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "m", UID: types.UID("machine-" + uid)},
		Spec: v1alpha1.MonolithMachineSpec{AddressesFromPools: []corev1.TypedLocalObjectReference{
			{APIGroup: ptr.To("ipam.cluster.x-k8s.io"), Kind: "MonolithIPPool", Name: "p"},
		}},
	}
}

// claimOf is the claim m-0 controlled by an object of uid, with an address.
func claimOf(uid string, deleting bool) *ipamv1.IPAddressClaim {
	c := &ipamv1.IPAddressClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: addressclaims.ClaimName("m", 0),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "MonolithMachine", Name: "m",
				UID: types.UID("machine-" + uid), Controller: ptr.To(true)}},
			Finalizers: []string{v1alpha1.ClaimFinalizer, "other.example.com/keep"},
		},
		Status: ipamv1.IPAddressClaimStatus{AddressRef: ipamv1.IPAddressReference{Name: "a"}},
	}
	if deleting {
		c.DeletionTimestamp = ptr.To(metav1.Now())
	}
	return c
}

func newClient(t *testing.T, objs ...client.Object) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{ipamv1.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	address := &ipamv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"}, Spec: ipamv1.IPAddressSpec{Address: "10.0.0.5", Prefix: ptr.To[int32](24)}}
	return fake.NewClientBuilder().WithScheme(scheme).WithObjects(append(objs, address)...).WithStatusSubresource(&ipamv1.IPAddressClaim{}).Build()
}

var cluster = &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}}

// A claim found by name but controlled by another object (e.g. an earlier
// machine of the same name) is never used nor deleted.
func TestAClaimOfAnotherObjectIsNeitherUsedNorReleased(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	foreign := claimOf("earlier", false)
	c := newClient(t, foreign)
	mm := machine("now")

	res, err := addressclaims.Reconcile(ctx, c, mm, cluster)
	g.Expect(err).To(MatchError(ContainSubstring("IPAddressClaim m-0 exists and belongs to another object")))
	g.Expect(res.Ready).To(BeFalse())
	g.Expect(res.Static).To(BeEmpty())
	g.Expect(res.Progress.Reason).To(Equal(v1alpha1.FailedReason))

	g.Expect(addressclaims.Release(ctx, c, mm)).To(Succeed())
	got := &ipamv1.IPAddressClaim{}
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(foreign), got)).To(Succeed(), "not deleted")
	g.Expect(got.Finalizers).To(ContainElement(v1alpha1.ClaimFinalizer), "its finalizer is not ours to remove")
}

// A claim being deleted is not used: a foreign one is waited out, and our
// own (deleted before the node exists) is let go to be claimed again.
func TestADeletingClaimIsNotUsed(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()

	c := newClient(t, claimOf("earlier", true))
	res, err := addressclaims.Reconcile(ctx, c, machine("now"), cluster)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Ready).To(BeFalse(), "waits for the earlier machine's claim to go")

	ours := claimOf("now", true)
	c = newClient(t, ours)
	res, err = addressclaims.Reconcile(ctx, c, machine("now"), cluster)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Ready).To(BeFalse(), "the address of a deleting claim is not used")
	got := &ipamv1.IPAddressClaim{}
	err = c.Get(ctx, client.ObjectKeyFromObject(ours), got)
	if !apierrors.IsNotFound(err) {
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got.Finalizers).NotTo(ContainElement(v1alpha1.ClaimFinalizer), "our finalizer is off, so that it goes")
	}
}

// Our own live claim is used as before.
func TestOurClaimIsUsed(t *testing.T) {
	g := NewWithT(t)
	c := newClient(t, claimOf("now", false))
	res, err := addressclaims.Reconcile(context.Background(), c, machine("now"), cluster)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Ready).To(BeTrue())
	g.Expect(res.Static).To(HaveLen(1))
	g.Expect(res.Static[0].Address.String()).To(Equal("10.0.0.5"))
}

// A claim its IPAM provider cannot serve shows why on the machine: the
// provider's reason (PoolExhausted) and its message, naming the pool,
// not only a count of waiting claims.
func TestAnExhaustedPoolShowsOnTheMachineWithItsReasonAndName(t *testing.T) {
	g := NewWithT(t)
	mm := machine("now")
	mm.Spec.AddressesFromPools = append(mm.Spec.AddressesFromPools,
		corev1.TypedLocalObjectReference{APIGroup: ptr.To("ipam.cluster.x-k8s.io"), Kind: "MonolithIPPool", Name: "full"})
	waiting := claimOf("now", false)
	waiting.Name = addressclaims.ClaimName("m", 1)
	waiting.Spec.PoolRef = ipamv1.IPPoolReference{APIGroup: "ipam.cluster.x-k8s.io", Kind: "MonolithIPPool", Name: "full"}
	waiting.Status.AddressRef = ipamv1.IPAddressReference{}
	conditions.Set(waiting, metav1.Condition{Type: ipamv1.IPAddressClaimReadyCondition, Status: metav1.ConditionFalse,
		Reason: ipamv1.IPAddressClaimReadyPoolExhaustedReason, Message: "MonolithIPPool ns/full has no free address"})
	c := newClient(t, claimOf("now", false), waiting)

	res, err := addressclaims.Reconcile(context.Background(), c, mm, cluster)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Ready).To(BeFalse())
	g.Expect(res.Progress).NotTo(BeNil())
	g.Expect(res.Progress.Reason).To(Equal("PoolExhausted"))
	g.Expect(res.Progress.Message).To(Equal("IPAddressClaim m-1: PoolExhausted: MonolithIPPool ns/full has no free address; Waiting for 1 of 2 IP addresses"))
}

// A claim its provider has not looked at yet is only counted.
func TestAClaimNotLookedAtYetIsOnlyCounted(t *testing.T) {
	g := NewWithT(t)
	fresh := claimOf("now", false)
	fresh.Status.AddressRef = ipamv1.IPAddressReference{}
	mm := machine("now")
	res, err := addressclaims.Reconcile(context.Background(), newClient(t, fresh), mm, cluster)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Ready).To(BeFalse())
	g.Expect(res.Progress.Reason).To(Equal(v1alpha1.WaitingForIPAddressesReason))
	g.Expect(res.Progress.Message).To(Equal("Waiting for 1 of 1 IP addresses"))
}
