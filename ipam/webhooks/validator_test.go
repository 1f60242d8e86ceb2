package webhooks_test

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/capi-monolith/capi-monolith/ipam/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/ipam/webhooks"
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
	tests := []struct {
		name    string
		call    func(v *webhooks.PoolValidator) error
		wantErr string
	}{
		{
			name: "create of a nil object is a bad request",
			call: func(v *webhooks.PoolValidator) error {
				_, err := v.ValidateCreate(t.Context(), nil)
				return err
			},
			wantErr: "expected a pool, got nothing",
		},
		{
			name: "create of a nil pool pointer is a bad request",
			call: func(v *webhooks.PoolValidator) error {
				_, err := v.ValidateCreate(t.Context(), (*v1alpha1.GlobalMonolithIPPool)(nil))
				return err
			},
			wantErr: "expected a pool, got nothing",
		},
		{
			name: "create of a foreign type is a bad request",
			call: func(v *webhooks.PoolValidator) error {
				_, err := v.ValidateCreate(t.Context(), &corev1.ConfigMap{})
				return err
			},
			wantErr: "expected a MonolithIPPool or a GlobalMonolithIPPool, got *v1.ConfigMap",
		},
		{
			name: "update from a nil pool pointer is a bad request",
			call: func(v *webhooks.PoolValidator) error {
				_, err := v.ValidateUpdate(t.Context(), (*v1alpha1.MonolithIPPool)(nil), valid)
				return err
			},
			wantErr: "expected a pool, got nothing",
		},
		{
			name: "update to a nil object is a bad request",
			call: func(v *webhooks.PoolValidator) error {
				_, err := v.ValidateUpdate(t.Context(), valid, runtime.Object(nil))
				return err
			},
			wantErr: "expected a pool, got nothing",
		},
		{
			name: "update that changes the kind is a bad request",
			call: func(v *webhooks.PoolValidator) error {
				_, err := v.ValidateUpdate(t.Context(), valid, global("p", valid.Spec))
				return err
			},
			wantErr: "cannot update a MonolithIPPool into a GlobalMonolithIPPool",
		},
		{
			name: "delete of a nil pool pointer is a bad request",
			call: func(v *webhooks.PoolValidator) error {
				_, err := v.ValidateDelete(t.Context(), (*v1alpha1.MonolithIPPool)(nil))
				return err
			},
			wantErr: "expected a pool, got nothing",
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
