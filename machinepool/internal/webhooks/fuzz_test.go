package webhooks

import (
	"context"
	"encoding/json"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capi-monolith/capi-monolith/machinepool/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/test/envtest"
)

// FuzzMachinePoolWebhooks sends random and mutated specs of both kinds
// through validation, on create and on update: no panic, and every
// rejection is a field error naming its field. `make fuzz` runs it for
// long; `go test` runs the seeds.
func FuzzMachinePoolWebhooks(f *testing.F) {
	seeds := []string{
		`{"template":{"backend":{"docker":{"image":"kindest/node:v1.36.3"}}},"strategy":{"maxSurge":1,"maxUnavailable":0}}`,
		`{"template":{"backend":{"inMemory":{"provisioningDelay":"2h","bootstrapDelay":"-1s"}},"addressesFromPools":[{},{"apiGroup":"g","kind":"k","name":"n"},{"apiGroup":"g","kind":"k","name":"n"}]}}`,
		`{"providerID":"monolith-pool://ns/p","template":{"backend":{"docker":{},"inMemory":{}}}}`,
		`{}`,
	}
	for i, s := range seeds {
		f.Add(i%2 == 0, []byte(s), []byte(seeds[(i+1)%len(seeds)]))
	}
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, template bool, spec, oldSpec []byte) {
		var cur, old v1alpha1.MonolithMachinePoolSpec
		if json.Unmarshal(spec, &cur) != nil {
			return
		}
		oldOK := json.Unmarshal(oldSpec, &old) == nil
		meta := metav1.ObjectMeta{Namespace: "ns", Name: "p"}
		if template {
			t1 := &v1alpha1.MonolithMachinePoolTemplate{ObjectMeta: meta}
			t1.Spec.Template.Spec = cur
			_, err := templateValidator{}.ValidateCreate(ctx, t1)
			envtest.ExpectFieldErrors(t, err)
			if oldOK {
				t0 := &v1alpha1.MonolithMachinePoolTemplate{ObjectMeta: meta}
				t0.Spec.Template.Spec = old
				_, err = templateValidator{}.ValidateUpdate(ctx, t0, t1)
				envtest.ExpectFieldErrors(t, err)
			}
			return
		}
		p1 := &v1alpha1.MonolithMachinePool{ObjectMeta: meta, Spec: cur}
		_, err := poolValidator{}.ValidateCreate(ctx, p1)
		envtest.ExpectFieldErrors(t, err)
		if oldOK {
			_, err = poolValidator{}.ValidateUpdate(ctx, &v1alpha1.MonolithMachinePool{ObjectMeta: meta, Spec: old}, p1)
			envtest.ExpectFieldErrors(t, err)
		}
	})
}
