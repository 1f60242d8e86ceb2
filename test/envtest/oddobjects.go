package envtest

import (
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// OddObjects are the objects a validating webhook of ours is called with in
// ExpectOddObjectsRejected.
type OddObjects struct {
	// Valid is a valid object of one of the validator's kinds.
	Valid runtime.Object
	// TypedNil is a nil pointer of one of the validator's kinds.
	TypedNil runtime.Object
	// OtherKind is a valid object of another of the validator's kinds.
	OtherKind runtime.Object
	// WantNil, WantForeign and WantKindChange are what the errors for a nil
	// object, a ConfigMap, and an update from Valid to OtherKind contain.
	WantNil, WantForeign, WantKindChange string
}

// ExpectOddObjectsRejected calls v with what the apiserver never sends (nil
// objects, typed nil pointers, foreign types, an update that changes the
// kind) and expects a 400 naming the problem from every call, never a
// panic.
func ExpectOddObjectsRejected(t *testing.T, v admission.Validator[runtime.Object], o OddObjects) {
	t.Helper()
	ctx := t.Context()
	tests := []struct {
		name    string
		call    func() error
		wantErr string
	}{
		{"create of a nil object", func() error { _, err := v.ValidateCreate(ctx, nil); return err }, o.WantNil},
		{"create of a nil pointer", func() error { _, err := v.ValidateCreate(ctx, o.TypedNil); return err }, o.WantNil},
		{"create of a foreign type", func() error { _, err := v.ValidateCreate(ctx, &corev1.ConfigMap{}); return err }, o.WantForeign},
		{"update from a nil pointer", func() error { _, err := v.ValidateUpdate(ctx, o.TypedNil, o.Valid); return err }, o.WantNil},
		{"update to a nil object", func() error { _, err := v.ValidateUpdate(ctx, o.Valid, nil); return err }, o.WantNil},
		{"update that changes the kind", func() error { _, err := v.ValidateUpdate(ctx, o.Valid, o.OtherKind); return err }, o.WantKindChange},
		{"delete of a nil pointer", func() error { _, err := v.ValidateDelete(ctx, o.TypedNil); return err }, o.WantNil},
	}
	for _, tt := range tests {
		t.Run(tt.name+" is a bad request", func(t *testing.T) {
			g := NewWithT(t)
			err := tt.call()
			g.Expect(apierrors.IsBadRequest(err)).To(BeTrue(), "want a 400, got %v", err)
			g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
		})
	}
}

// ExpectFieldErrors fails unless err is nil or an Invalid error whose every
// cause names a field and a message: a rejection must say which field is
// wrong.
func ExpectFieldErrors(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return
	}
	var status *apierrors.StatusError
	if !errors.As(err, &status) || !apierrors.IsInvalid(err) {
		t.Fatalf("rejection is not a field error: %v", err)
	}
	if status.ErrStatus.Details == nil || len(status.ErrStatus.Details.Causes) == 0 {
		t.Fatalf("rejection names no field: %v", err)
	}
	for _, c := range status.ErrStatus.Details.Causes {
		if c.Field == "" || c.Message == "" {
			t.Fatalf("a cause has no field or message: %+v in %v", c, err)
		}
	}
}
