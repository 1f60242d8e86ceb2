package webhooks_test

import (
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/infra/internal/webhooks"
	"github.com/capi-monolith/capi-monolith/test/envtest"
)

// These cases call the validator and the defaulter directly: they are what
// the apiserver cannot send (nil, foreign types), rejects before the
// webhook (the CRD's own checks), or cannot be made to do (fail a read).

func fakeValidator(t *testing.T, objs ...client.Object) *webhooks.Validator {
	t.Helper()
	c := fake.NewClientBuilder().WithScheme(env.Scheme).WithObjects(objs...).Build()
	return &webhooks.Validator{Client: c}
}

func TestOddObjectsAreRejectedWithoutPanic(t *testing.T) {
	valid := cluster("ns", "c", v1alpha1.MonolithClusterSpec{Backend: inMemoryBackend()})
	envtest.ExpectOddObjectsRejected(t, fakeValidator(t), envtest.OddObjects{
		Valid:          valid,
		TypedNil:       (*v1alpha1.MonolithMachine)(nil),
		OtherKind:      clusterTemplate("ns", "c", valid.Spec),
		WantNil:        "expected an infra object, got nothing",
		WantForeign:    "expected a MonolithCluster, MonolithClusterTemplate, MonolithMachine or MonolithMachineTemplate, got *v1.ConfigMap",
		WantKindChange: "cannot update a MonolithCluster into a MonolithClusterTemplate",
	})
}

func TestOddObjectsAreNotDefaultedWithoutPanic(t *testing.T) {
	tests := []struct {
		name    string
		call    func(v *webhooks.Validator) error
		wantErr string
	}{
		{
			name: "defaulting a nil cluster pointer is a bad request",
			call: func(*webhooks.Validator) error {
				return webhooks.Defaulter{}.Default(t.Context(), (*v1alpha1.MonolithCluster)(nil))
			},
			wantErr: "expected an infra object, got nothing",
		},
		{
			name: "defaulting a machine is a bad request",
			call: func(*webhooks.Validator) error {
				return webhooks.Defaulter{}.Default(t.Context(), machine("ns", "m", v1alpha1.MonolithMachineSpec{}))
			},
			wantErr: "expected a MonolithCluster or a MonolithClusterTemplate to default, got a MonolithMachine",
		},
		{
			name:    "defaulting a foreign type is a bad request",
			call:    func(*webhooks.Validator) error { return webhooks.Defaulter{}.Default(t.Context(), &corev1.Secret{}) },
			wantErr: "got *v1.Secret",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			err := tt.call(fakeValidator(t))
			g.Expect(apierrors.IsBadRequest(err)).To(BeTrue(), "want a 400, got %v", err)
			g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
		})
	}
}

// TestChecksTheSchemaAlsoMakes covers the checks the CRD makes first on a
// server, for servers where it was not applied and for direct callers.
func TestChecksTheSchemaAlsoMakes(t *testing.T) {
	tests := []struct {
		name    string
		obj     client.Object
		wantErr []string
	}{
		{
			name:    "a cluster without a backend is rejected",
			obj:     cluster("ns", "c", v1alpha1.MonolithClusterSpec{}),
			wantErr: []string{"spec.backend: Required value: exactly one of docker or inMemory must be set"},
		},
		{
			name: "a cluster with both backends is rejected",
			obj: cluster("ns", "c", v1alpha1.MonolithClusterSpec{Backend: v1alpha1.ClusterBackend{
				Docker: &v1alpha1.DockerClusterBackend{}, InMemory: &v1alpha1.InMemoryClusterBackend{},
			}}),
			wantErr: []string{`spec.backend: Invalid value: "docker, inMemory": exactly one of docker or inMemory must be set, not both`},
		},
		{
			name:    "a machine template without a backend is rejected",
			obj:     machineTemplate("ns", "t", v1alpha1.MonolithMachineSpec{}),
			wantErr: []string{"spec.template.spec.backend: Required value: exactly one of docker or inMemory must be set"},
		},
		{
			name: "a machine with both backends is rejected",
			obj: machine("ns", "m", v1alpha1.MonolithMachineSpec{Backend: v1alpha1.MachineBackend{
				Docker: &v1alpha1.DockerMachineBackend{}, InMemory: &v1alpha1.InMemoryMachineBackend{},
			}}),
			wantErr: []string{`spec.backend: Invalid value: "docker, inMemory"`},
		},
		{
			name: "empty and repeated failure domain names are rejected",
			obj: cluster("ns", "c", v1alpha1.MonolithClusterSpec{
				Backend:        inMemoryBackend(),
				FailureDomains: []clusterv1.FailureDomain{{Name: ""}, {Name: "a"}, {Name: "a"}},
			}),
			wantErr: []string{
				"spec.failureDomains[0].name: Required value: a failure domain needs a name",
				`spec.failureDomains[2].name: Duplicate value: "a"`,
			},
		},
		{
			name: "a failure domain network that is no Docker network name is rejected",
			obj: cluster("ns", "c", v1alpha1.MonolithClusterSpec{
				Backend: dockerBackend(),
				FailureDomains: []clusterv1.FailureDomain{
					{Name: "a", Attributes: map[string]string{v1alpha1.FailureDomainNetworkAttribute: "net-a"}},
					{Name: "b", Attributes: map[string]string{v1alpha1.FailureDomainNetworkAttribute: "-x y"}},
				},
			}),
			wantErr: []string{`spec.failureDomains[1].attributes[network]: Invalid value: "-x y": must be a Docker network name`},
		},
		{
			name: "out-of-range ports are rejected",
			obj: cluster("ns", "c", v1alpha1.MonolithClusterSpec{
				Backend:              v1alpha1.ClusterBackend{Docker: &v1alpha1.DockerClusterBackend{LoadBalancerHostPort: 70000}},
				ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: "10.0.0.1", Port: -1},
			}),
			wantErr: []string{
				"spec.controlPlaneEndpoint.port: Invalid value: -1: must be between 1 and 65535, or 0 with an empty host to let the backend choose",
				"spec.backend.docker.loadBalancerHostPort: Invalid value: 70000: must be between 0 and 65535 (0 picks a free port)",
			},
		},
		{
			name: "an IPv6 node CIDR without room for a node is rejected",
			obj: cluster("ns", "c", v1alpha1.MonolithClusterSpec{Backend: v1alpha1.ClusterBackend{
				InMemory: &v1alpha1.InMemoryClusterBackend{NodeCIDR: "fd00::/127"},
			}}),
			wantErr: []string{`spec.backend.inMemory.nodeCIDR: Invalid value: "fd00::/127": leaves no address for a node: the prefix length must be at most 126 for IPv6`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := fakeValidator(t).ValidateCreate(t.Context(), tt.obj)
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want a 422, got %v", err)
			g.Expect(err).To(haveAll(tt.wantErr...))
		})
	}
}

func TestSmallestNodeCIDRsAreAccepted(t *testing.T) {
	g := NewWithT(t)
	for _, cidr := range []string{"10.0.0.0/30", "fd00::/126"} {
		c := cluster("ns", "c", v1alpha1.MonolithClusterSpec{Backend: v1alpha1.ClusterBackend{
			InMemory: &v1alpha1.InMemoryClusterBackend{NodeCIDR: cidr},
		}})
		_, err := fakeValidator(t).ValidateCreate(t.Context(), c)
		g.Expect(err).NotTo(HaveOccurred(), cidr)
	}
}

func TestMachineCheckWithoutClient(t *testing.T) {
	g := NewWithT(t)
	v := &webhooks.Validator{}
	m := machine("ns", "m", v1alpha1.MonolithMachineSpec{Backend: dockerMachineBackend()})
	_, err := v.ValidateCreate(t.Context(), m)
	g.Expect(err).NotTo(HaveOccurred(), "a machine without a cluster label reads nothing")

	_, err = v.ValidateCreate(t.Context(), inCluster(m, "c1"))
	g.Expect(apierrors.IsInternalError(err)).To(BeTrue(), "want a 500, got %v", err)
	g.Expect(err).To(MatchError(ContainSubstring("the infra validator has no Client")))
}

func TestMachineWhoseClusterCannotBeReadIsAcceptedWithAWarning(t *testing.T) {
	g := NewWithT(t)
	c := fake.NewClientBuilder().WithScheme(env.Scheme).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
			return errors.New("unable to get: ns/c1 because of unknown namespace for the cache")
		},
	}).Build()
	v := &webhooks.Validator{Client: c}
	m := inCluster(machine("ns", "m", v1alpha1.MonolithMachineSpec{Backend: dockerMachineBackend()}), "c1")
	warnings, err := v.ValidateCreate(t.Context(), m)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(warnings).To(ConsistOf("the backend could not be compared with the cluster's: " +
		"failed to get Cluster c1: unable to get: ns/c1 because of unknown namespace for the cache"))
}

func TestMachineBackendIsComparedThroughTheClient(t *testing.T) {
	g := NewWithT(t)
	v := fakeValidator(t,
		capiCluster("ns", "c1", "MonolithCluster", "mc"),
		cluster("ns", "mc", v1alpha1.MonolithClusterSpec{Backend: dockerBackend()}),
	)
	m := inCluster(machine("ns", "m", v1alpha1.MonolithMachineSpec{Backend: inMemoryMachineBackend()}), "c1")
	_, err := v.ValidateCreate(t.Context(), m)
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want a 422, got %v", err)
	g.Expect(err).To(MatchError(ContainSubstring(`spec.backend: Invalid value: "inMemory": must be the backend of the machine's cluster: MonolithCluster mc of Cluster c1 uses docker`)))
}

func TestTemplateDryRunNeedsTheRequestAndTheAnnotation(t *testing.T) {
	old := machineTemplate("ns", "t", v1alpha1.MonolithMachineSpec{Backend: inMemoryMachineBackend()})
	changed := old.DeepCopy()
	changed.Spec.Template.Spec.Backend = dockerMachineBackend()
	annotated := changed.DeepCopy()
	annotated.Annotations = map[string]string{clusterv1.TopologyDryRunAnnotation: ""}
	dryRun := func(ctx context.Context) context.Context {
		return admission.NewContextWithRequest(ctx, admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{DryRun: ptr.To(true)}})
	}
	tests := []struct {
		name    string
		ctx     func(context.Context) context.Context
		obj     *v1alpha1.MonolithMachineTemplate
		allowed bool
	}{
		{name: "an annotated change outside an admission request is rejected", ctx: func(ctx context.Context) context.Context { return ctx }, obj: annotated},
		{name: "an annotated change in a dry-run request is accepted", ctx: dryRun, obj: annotated, allowed: true},
		{name: "a change without the annotation in a dry-run request is rejected", ctx: dryRun, obj: changed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := fakeValidator(t).ValidateUpdate(tt.ctx(t.Context()), old, tt.obj)
			if tt.allowed {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring("spec: Forbidden: a MonolithMachineTemplate's spec is immutable")))
		})
	}
}

// An object stored before the defaulter ran gets its defaults on its next
// update; that alone is no spec change.
func TestUpdatesOfObjectsStoredWithoutDefaultsAreAccepted(t *testing.T) {
	g := NewWithT(t)
	v := fakeValidator(t)

	oldTemplate := clusterTemplate("ns", "t", v1alpha1.MonolithClusterSpec{Backend: dockerBackend()})
	newTemplate := oldTemplate.DeepCopy()
	newTemplate.Labels = map[string]string{"team": "a"}
	g.Expect(webhooks.Defaulter{}.Default(t.Context(), newTemplate)).To(Succeed())
	g.Expect(newTemplate.Spec.Template.Spec.Backend.Docker.Network).To(Equal(v1alpha1.DefaultDockerNetwork))
	_, err := v.ValidateUpdate(t.Context(), oldTemplate, newTemplate)
	g.Expect(err).NotTo(HaveOccurred())

	oldCluster := cluster("ns", "c", v1alpha1.MonolithClusterSpec{Backend: inMemoryBackend()})
	newCluster := oldCluster.DeepCopy()
	g.Expect(webhooks.Defaulter{}.Default(t.Context(), newCluster)).To(Succeed())
	g.Expect(newCluster.Spec.Backend.InMemory.NodeCIDR).To(Equal(v1alpha1.DefaultInMemoryNodeCIDR))
	_, err = v.ValidateUpdate(t.Context(), oldCluster, newCluster)
	g.Expect(err).NotTo(HaveOccurred())
}

func TestSetupWithoutManagerFails(t *testing.T) {
	g := NewWithT(t)
	g.Expect(webhooks.SetupWithManager(nil)).To(MatchError(ContainSubstring("no manager")))
	g.Expect((&webhooks.Validator{}).SetupWithManager(nil)).To(MatchError(ContainSubstring("no manager")))
}

// Two MonolithClusters naming one endpoint would race for its port (issue
// 28): an endpoint another MonolithCluster records is refused, on create
// and when it is first set, and another namespace's cluster is not named.
func TestAnEndpointAnotherMonolithClusterRecordsIsRefused(t *testing.T) {
	ep := clusterv1.APIEndpoint{Host: "127.0.0.1", Port: 20001}
	recorded := cluster("ns", "first", v1alpha1.MonolithClusterSpec{Backend: inMemoryBackend(), ControlPlaneEndpoint: ep})
	elsewhere := cluster("other", "first", v1alpha1.MonolithClusterSpec{Backend: inMemoryBackend(),
		ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: "127.0.0.1", Port: 20002}})
	v := fakeValidator(t, recorded, elsewhere)

	t.Run("the same endpoint in the same namespace is refused, naming the holder", func(t *testing.T) {
		g := NewWithT(t)
		_, err := v.ValidateCreate(t.Context(), cluster("ns", "second", v1alpha1.MonolithClusterSpec{Backend: inMemoryBackend(), ControlPlaneEndpoint: ep}))
		g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want a 422, got %v", err)
		g.Expect(err).To(MatchError(ContainSubstring("spec.controlPlaneEndpoint: Forbidden: 127.0.0.1:20001 is already recorded by MonolithCluster first")))
	})
	t.Run("another namespace's endpoint is refused without naming its cluster", func(t *testing.T) {
		g := NewWithT(t)
		_, err := v.ValidateCreate(t.Context(), cluster("ns", "second", v1alpha1.MonolithClusterSpec{Backend: inMemoryBackend(),
			ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: "127.0.0.1", Port: 20002}}))
		g.Expect(err).To(MatchError(ContainSubstring("is already recorded by a MonolithCluster of another namespace")))
		g.Expect(err.Error()).NotTo(ContainSubstring("other/"))
	})
	t.Run("an endpoint set on an update is checked too", func(t *testing.T) {
		g := NewWithT(t)
		old := cluster("ns", "second", v1alpha1.MonolithClusterSpec{Backend: inMemoryBackend()})
		updated := old.DeepCopy()
		updated.Spec.ControlPlaneEndpoint = ep
		_, err := v.ValidateUpdate(t.Context(), old, updated)
		g.Expect(err).To(MatchError(ContainSubstring("is already recorded by MonolithCluster first")))
	})
	t.Run("a free endpoint, and the holder itself, are accepted", func(t *testing.T) {
		g := NewWithT(t)
		_, err := v.ValidateCreate(t.Context(), cluster("ns", "second", v1alpha1.MonolithClusterSpec{Backend: inMemoryBackend(),
			ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: "127.0.0.1", Port: 20003}}))
		g.Expect(err).NotTo(HaveOccurred())
		_, err = v.ValidateUpdate(t.Context(), recorded, recorded.DeepCopy())
		g.Expect(err).NotTo(HaveOccurred())
	})
}
