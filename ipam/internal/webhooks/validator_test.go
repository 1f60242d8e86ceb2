package webhooks_test

import (
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/capi-monolith/capi-monolith/ipam/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/ipam/internal/webhooks"
	"github.com/capi-monolith/capi-monolith/test/envtest"
)

// These cases call the validator directly: they are what the apiserver
// cannot send (nil, foreign types) or rejects before the webhook (a
// negative grace period breaks the CRD's minimum).

func fakeValidator(t *testing.T) *webhooks.PoolValidator {
	t.Helper()
	c := fake.NewClientBuilder().WithScheme(env.Scheme).Build()
	return &webhooks.PoolValidator{Client: c}
}

func TestOddObjectsAreRejectedWithoutPanic(t *testing.T) {
	valid := namespaced("ns", "p", spec(24, "10.60.0.0/24"))
	envtest.ExpectOddObjectsRejected(t, fakeValidator(t), envtest.OddObjects{
		Valid:          valid,
		TypedNil:       (*v1alpha1.GlobalMonolithIPPool)(nil),
		OtherKind:      global("p", valid.Spec),
		WantNil:        "expected a pool, got nothing",
		WantForeign:    "expected a MonolithIPPool or a GlobalMonolithIPPool, got *v1.ConfigMap",
		WantKindChange: "cannot update a MonolithIPPool into a GlobalMonolithIPPool",
	})
}

func TestNegativeGracePeriodIsRejected(t *testing.T) {
	g := NewWithT(t)
	p := namespaced("ns", "p", spec(24, "10.61.0.0/24"))
	p.Spec.AddressReuseGracePeriodSeconds = -1
	_, err := fakeValidator(t).ValidateCreate(t.Context(), p)
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want a 422, got %v", err)
	g.Expect(err).To(MatchError(ContainSubstring("spec.addressReuseGracePeriodSeconds: Invalid value: -1: must be greater than or equal to 0")))
}

func TestEmptyAddressesAreRequired(t *testing.T) {
	g := NewWithT(t)
	_, err := fakeValidator(t).ValidateCreate(t.Context(), global("g", spec(24)))
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want a 422, got %v", err)
	g.Expect(err).To(MatchError(ContainSubstring("spec.addresses: Required value: at least one address, range or CIDR is required")))
}

func TestValidatorWithoutClientFailsWithoutPanic(t *testing.T) {
	g := NewWithT(t)
	v := &webhooks.PoolValidator{}
	_, err := v.ValidateCreate(t.Context(), namespaced("ns", "p", spec(24, "10.62.0.0/24")))
	g.Expect(apierrors.IsInternalError(err)).To(BeTrue(), "want a 500, got %v", err)
	g.Expect(err).To(MatchError(ContainSubstring("the pool validator has no Client")))
	_, err = v.ValidateDelete(t.Context(), global("g", spec(24, "10.62.0.0/24")))
	g.Expect(err).To(MatchError(ContainSubstring("the pool validator has no Client")))
}

func TestSetupWithoutManagerFails(t *testing.T) {
	g := NewWithT(t)
	g.Expect(webhooks.SetupWithManager(nil)).To(MatchError(ContainSubstring("no manager")))
	g.Expect((&webhooks.PoolValidator{}).SetupWithManager(nil)).To(MatchError(ContainSubstring("no manager")))
}
