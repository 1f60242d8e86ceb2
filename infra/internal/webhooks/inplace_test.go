package webhooks_test

import (
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
)

// kcpManager is the field manager KubeadmControlPlane applies the desired
// infrastructure machine with when it triggers an in-place update (Cluster
// API v1.14, kcpManagerName).
const kcpManager = "capi-kubeadmcontrolplane"

// inPlaceApply is the server-side apply Cluster API sends to trigger an
// in-place update: the desired infrastructure machine, computed from the
// (new) template, without providerID or failureDomain, with the in-progress
// annotation; forced, as ssa.Patch does.
func inPlaceApply(ns, name string, spec v1alpha1.MonolithMachineSpec) (client.Object, error) {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&spec)
	if err != nil {
		return nil, err
	}
	obj := &unstructured.Unstructured{Object: map[string]any{"spec": u}}
	obj.SetAPIVersion(v1alpha1.GroupVersion.String())
	obj.SetKind("MonolithMachine")
	obj.SetNamespace(ns)
	obj.SetName(name)
	obj.SetAnnotations(map[string]string{
		clusterv1.TemplateClonedFromNameAnnotation:      "new-template",
		clusterv1.TemplateClonedFromGroupKindAnnotation: "MonolithMachineTemplate.infrastructure.cluster.x-k8s.io",
		clusterv1.UpdateInProgressAnnotation:            "",
	})
	return obj, nil
}

// TestInPlaceUpdateBySSA sends the writes of Cluster API's in-place update
// path to the webhook: the patch CanUpdateMachine computes (from the field
// list the webhook reads) and the server-side apply of the desired machine.
// Both pass for the in-place fields; anything else is still refused.
func TestInPlaceUpdateBySSA(t *testing.T) {
	g := NewWithT(t)
	ns := env.Namespace(t, "inplace")
	cur := machine(ns, "m", v1alpha1.MonolithMachineSpec{
		Backend:       v1alpha1.MachineBackend{InMemory: &v1alpha1.InMemoryMachineBackend{ProvisioningDelay: duration(time.Second)}},
		ProviderID:    "inmemory://" + ns + "/m",
		FailureDomain: "fd-a",
	})
	g.Expect(env.Client.Create(t.Context(), cur)).To(Succeed())

	// The patch the runtime extension returns to CanUpdateMachine.
	des := cur.Spec.DeepCopy()
	des.Backend.InMemory.ProvisioningDelay = duration(2 * time.Second)
	changes, err := v1alpha1.InPlaceMachineSpecChanges(&cur.Spec, des)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(changes).NotTo(BeNil())
	patch, err := json.Marshal(map[string]any{"spec": changes})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env.Client.Patch(t.Context(), cur, client.RawPatch("application/merge-patch+json", patch))).To(Succeed())
	g.Expect(cur.Spec.Backend.InMemory.ProvisioningDelay.Duration).To(Equal(2 * time.Second))

	// The apply KubeadmControlPlane (or a MachineSet) sends next.
	tmpl := v1alpha1.MonolithMachineSpec{Backend: v1alpha1.MachineBackend{InMemory: &v1alpha1.InMemoryMachineBackend{
		ProvisioningDelay: duration(3 * time.Second), BootstrapDelay: duration(time.Second),
	}}}
	obj, err := inPlaceApply(ns, "m", tmpl)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env.Client.Patch(t.Context(), obj, client.Apply, client.FieldOwner(kcpManager), client.ForceOwnership)).To(Succeed())
	got := &v1alpha1.MonolithMachine{}
	g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(cur), got)).To(Succeed())
	g.Expect(got.Spec.Backend.InMemory.ProvisioningDelay.Duration).To(Equal(3 * time.Second))
	g.Expect(got.Spec.Backend.InMemory.BootstrapDelay.Duration).To(Equal(time.Second))
	g.Expect(got.Spec.ProviderID).To(Equal("inmemory://"+ns+"/m"), "the apply leaves fields it does not name")
	g.Expect(got.Spec.FailureDomain).To(Equal("fd-a"))

	// Outside the list, the same apply is refused.
	obj, err = inPlaceApply(ns, "m", v1alpha1.MonolithMachineSpec{
		Backend:            tmpl.Backend,
		AddressesFromPools: []corev1.TypedLocalObjectReference{poolRef(ipamGroup, "MonolithIPPool", "p")},
	})
	g.Expect(err).NotTo(HaveOccurred())
	err = env.Client.Patch(t.Context(), obj, client.Apply, client.FieldOwner(kcpManager), client.ForceOwnership)
	expectOutcome(g, err, []string{byMachineWebhook, "spec.addressesFromPools: Forbidden"})
	obj, err = inPlaceApply(ns, "m", v1alpha1.MonolithMachineSpec{Backend: dockerMachineBackend()})
	g.Expect(err).NotTo(HaveOccurred())
	err = env.Client.Patch(t.Context(), obj, client.Apply, client.FieldOwner(kcpManager), client.ForceOwnership)
	g.Expect(err).To(HaveOccurred(), "a machine never switches backend in place")
}
