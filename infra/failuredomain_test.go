package infra_test

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/test/managertest"
)

// Cluster API v1.14 writes a Machine's failure domain on the Machine only:
// the node goes there all the same, and the MonolithMachine reports where
// it went (status.failureDomain, which core copies to the Machine's
// status). A MonolithMachine's own spec.failureDomain (pool instances)
// counts when the Machine names none.
func TestMachinesAreProvisionedInTheirMachinesFailureDomain(t *testing.T) {
	g := NewWithT(t)
	start(t, managertest.Infra())
	f := newFixture(t, nil)

	newMachine := func(name, machineDomain, ownDomain string) *infrav1.MonolithMachine {
		labels := map[string]string{clusterv1.ClusterNameLabel: "c"}
		m := &clusterv1.Machine{
			ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name, Labels: labels},
			Spec: clusterv1.MachineSpec{ClusterName: "c", Version: "v1.36.3", FailureDomain: machineDomain,
				Bootstrap:         clusterv1.Bootstrap{DataSecretName: ptr.To("bootstrap")},
				InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "MonolithMachine", Name: name}},
		}
		g.Expect(env.Client.Create(ctx, m)).To(Succeed())
		mm := &infrav1.MonolithMachine{
			ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name, Labels: labels, OwnerReferences: ownedBy(m, "Machine")},
			Spec: infrav1.MonolithMachineSpec{FailureDomain: ownDomain,
				Backend: infrav1.MachineBackend{InMemory: &infrav1.InMemoryMachineBackend{}}},
		}
		g.Expect(env.Client.Create(ctx, mm)).To(Succeed())
		return mm
	}
	fromMachine := newMachine("from-machine", "fd-b", "")
	machineWins := newMachine("machine-wins", "fd-c", "fd-a")
	own := newMachine("own", "", "fd-a")
	none := newMachine("none", "", "")

	for mm, want := range map[*infrav1.MonolithMachine]string{fromMachine: "fd-b", machineWins: "fd-c", own: "fd-a", none: ""} {
		g.Eventually(func(g Gomega) {
			g.Expect(provisioned(g, mm)).To(BeTrue())
			g.Expect(mm.Status.FailureDomain).To(Equal(want))
		}, timeout).Should(Succeed(), mm.Name)
	}
	g.Expect(fromMachine.Spec.FailureDomain).To(BeEmpty(), "the spec is the user's, the status says where the node is")
}
