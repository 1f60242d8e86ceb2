package webhooks_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/machinepool/api/v1alpha1"
)

// topologyManager is the field manager of Cluster API's topology
// controller (structuredmerge.TopologyManagerName in Cluster API v1.14).
const topologyManager = "capi-topology"

const (
	poolWebhook     = `admission webhook "validation.monolithmachinepool.infrastructure.cluster.x-k8s.io" denied the request`
	templateWebhook = `admission webhook "validation.monolithmachinepooltemplate.infrastructure.cluster.x-k8s.io" denied the request`
	immutable       = "spec: Forbidden: a MonolithMachinePoolTemplate's spec is immutable"
)

func namespace(t *testing.T, g Gomega) string {
	t.Helper()
	ns, err := env.CreateNamespace(t.Context(), "mp-webhooks")
	g.Expect(err).NotTo(HaveOccurred())
	return ns.Name
}

func inMemorySpec() v1alpha1.MonolithMachinePoolSpec {
	return v1alpha1.MonolithMachinePoolSpec{Template: v1alpha1.InstanceTemplate{
		Backend: infrav1.MachineBackend{InMemory: &infrav1.InMemoryMachineBackend{}}}}
}

func template(ns string) *v1alpha1.MonolithMachinePoolTemplate {
	return &v1alpha1.MonolithMachinePoolTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "t"},
		Spec:       v1alpha1.MonolithMachinePoolTemplateSpec{Template: v1alpha1.MonolithMachinePoolTemplateResource{Spec: inMemorySpec()}},
	}
}

// applyAs server-side applies obj's spec (and annotations) as owner.
func applyAs(t *testing.T, _ Gomega, obj client.Object, owner string, opts ...client.ApplyOption) error {
	t.Helper()
	return env.ApplySpec(t.Context(), obj, owner, opts...)
}

func expectInvalid(g Gomega, err error, parts ...string) {
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want a 422, got %v", err)
	for _, p := range parts {
		g.Expect(err).To(MatchError(ContainSubstring(p)))
	}
}

// TestTemplateSSADryRun sends one spec change to a template in each way a
// client can: only the topology controller's dry-run gets through.
func TestTemplateSSADryRun(t *testing.T) {
	change := func(o *v1alpha1.MonolithMachinePoolTemplate) {
		o.Spec.Template.Spec.Template.Backend.InMemory.ProvisioningDelay = &metav1.Duration{Duration: 5 * time.Second}
	}
	markDryRun := func(o client.Object) { o.SetAnnotations(map[string]string{clusterv1.TopologyDryRunAnnotation: ""}) }
	tests := []struct {
		name string
		send func(t *testing.T, g Gomega, o *v1alpha1.MonolithMachinePoolTemplate) error
		// rejected: refused as immutable; otherwise accepted.
		rejected bool
	}{
		{name: "a spec update is rejected", rejected: true,
			send: func(t *testing.T, _ Gomega, o *v1alpha1.MonolithMachinePoolTemplate) error {
				change(o)
				return env.Client.Update(t.Context(), o)
			}},
		{name: "the topology controller's dry-run apply of a spec change is accepted",
			send: func(t *testing.T, g Gomega, o *v1alpha1.MonolithMachinePoolTemplate) error {
				change(o)
				markDryRun(o)
				return applyAs(t, g, o, topologyManager, client.DryRunAll)
			}},
		{name: "a real apply by the topology field manager is rejected", rejected: true,
			send: func(t *testing.T, g Gomega, o *v1alpha1.MonolithMachinePoolTemplate) error {
				change(o)
				markDryRun(o)
				return applyAs(t, g, o, topologyManager)
			}},
		{name: "a dry-run apply without the dry-run annotation is rejected", rejected: true,
			send: func(t *testing.T, g Gomega, o *v1alpha1.MonolithMachinePoolTemplate) error {
				change(o)
				return applyAs(t, g, o, topologyManager, client.DryRunAll)
			}},
		{name: "a dry-run update by another client is rejected", rejected: true,
			send: func(t *testing.T, _ Gomega, o *v1alpha1.MonolithMachinePoolTemplate) error {
				change(o)
				return env.Client.Update(t.Context(), o, client.DryRunAll, client.FieldOwner("kubectl-edit"))
			}},
		{name: "a metadata-only update is accepted",
			send: func(t *testing.T, _ Gomega, o *v1alpha1.MonolithMachinePoolTemplate) error {
				o.Labels = map[string]string{"team": "a"}
				return env.Client.Update(t.Context(), o)
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			o := template(namespace(t, g))
			g.Expect(env.Client.Create(t.Context(), o)).To(Succeed())
			stored := o.DeepCopy()
			err := tt.send(t, g, o)
			if tt.rejected {
				expectInvalid(g, err, templateWebhook, immutable)
			} else {
				g.Expect(err).NotTo(HaveOccurred())
			}
			got := &v1alpha1.MonolithMachinePoolTemplate{}
			g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(stored), got)).To(Succeed())
			g.Expect(got.Spec).To(Equal(stored.Spec), "nothing but metadata changes what is stored")
		})
	}
}

func TestTemplateDryRunStillChecksTheSpec(t *testing.T) {
	g := NewWithT(t)
	o := template(namespace(t, g))
	g.Expect(env.Client.Create(t.Context(), o)).To(Succeed())
	o.Spec.Template.Spec.Template.Backend.InMemory.BootstrapDelay = &metav1.Duration{Duration: -time.Second}
	o.SetAnnotations(map[string]string{clusterv1.TopologyDryRunAnnotation: ""})
	err := applyAs(t, g, o, topologyManager, client.DryRunAll)
	expectInvalid(g, err, templateWebhook, `spec.template.spec.template.backend.inMemory.bootstrapDelay: Invalid value: "-1s": must not be negative`)
	g.Expect(err).NotTo(MatchError(ContainSubstring("immutable")))
}

func TestPoolValidation(t *testing.T) {
	group := "ipam.cluster.x-k8s.io"
	ref := corev1.TypedLocalObjectReference{APIGroup: &group, Kind: "MonolithIPPool", Name: "nodes"}
	tests := []struct {
		name    string
		mutate  func(*v1alpha1.MonolithMachinePoolSpec)
		wantErr []string
	}{
		{name: "a valid pool is accepted", mutate: func(*v1alpha1.MonolithMachinePoolSpec) {}},
		{name: "a negative delay is rejected", wantErr: []string{poolWebhook,
			`spec.template.backend.inMemory.provisioningDelay: Invalid value: "-2s": must not be negative`},
			mutate: func(s *v1alpha1.MonolithMachinePoolSpec) {
				s.Template.Backend.InMemory.ProvisioningDelay = &metav1.Duration{Duration: -2 * time.Second}
			}},
		{name: "a repeated IP pool and one without a group are rejected, both named", wantErr: []string{poolWebhook,
			"spec.template.addressesFromPools[1]: Duplicate value", "spec.template.addressesFromPools[2].apiGroup: Required value"},
			mutate: func(s *v1alpha1.MonolithMachinePoolSpec) {
				s.Template.AddressesFromPools = []corev1.TypedLocalObjectReference{ref, ref, {Kind: "MonolithIPPool", Name: "other"}}
			}},
		{name: "a strategy that can replace nothing is rejected", wantErr: []string{poolWebhook,
			"spec.strategy: Invalid value", "maxSurge and maxUnavailable must not both be 0"},
			mutate: func(s *v1alpha1.MonolithMachinePoolSpec) {
				s.Strategy = v1alpha1.RollingUpdate{MaxSurge: ptr.To[int32](0)}
			}},
		{name: "a strategy without surge but with unavailability is accepted",
			mutate: func(s *v1alpha1.MonolithMachinePoolSpec) {
				s.Strategy = v1alpha1.RollingUpdate{MaxSurge: ptr.To[int32](0), MaxUnavailable: ptr.To[int32](1)}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			p := &v1alpha1.MonolithMachinePool{ObjectMeta: metav1.ObjectMeta{Namespace: namespace(t, g), Name: "p"}, Spec: inMemorySpec()}
			tt.mutate(&p.Spec)
			err := env.Client.Create(t.Context(), p)
			if tt.wantErr == nil {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			expectInvalid(g, err, tt.wantErr...)
		})
	}
}

func TestPoolUpdate(t *testing.T) {
	g := NewWithT(t)
	p := &v1alpha1.MonolithMachinePool{ObjectMeta: metav1.ObjectMeta{Namespace: namespace(t, g), Name: "p"}, Spec: inMemorySpec()}
	g.Expect(env.Client.Create(t.Context(), p)).To(Succeed())

	p.Spec.ProviderID = "monolith-pool:///x/p"
	p.Spec.Template.Backend.InMemory.BootstrapDelay = &metav1.Duration{Duration: time.Second}
	g.Expect(env.Client.Update(t.Context(), p)).To(Succeed(), "the instance template may change (a rollout), the provider ID be set")

	p.Spec.ProviderID = "monolith-pool:///y/p"
	expectInvalid(g, env.Client.Update(t.Context(), p), poolWebhook,
		`spec.providerID: Forbidden: cannot change once set; it is "monolith-pool:///x/p"`)
}
