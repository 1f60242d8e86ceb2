package webhooks_test

import (
	"context"
	"encoding/json"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/infra/internal/webhooks"
	"github.com/capi-monolith/capi-monolith/test/envtest"
)

// fuzzObject makes an object of one of the four kinds from a JSON spec;
// nil when the bytes do not decode (the apiserver would not decode them
// either).
func fuzzObject(kind uint8, spec []byte) client.Object {
	meta := metav1.ObjectMeta{Namespace: "ns", Name: "o"}
	var obj client.Object
	var target any
	switch kind % 4 {
	case 0:
		o := &v1alpha1.MonolithCluster{ObjectMeta: meta}
		obj, target = o, &o.Spec
	case 1:
		o := &v1alpha1.MonolithClusterTemplate{ObjectMeta: meta}
		obj, target = o, &o.Spec.Template.Spec
	case 2:
		o := &v1alpha1.MonolithMachine{ObjectMeta: meta}
		obj, target = o, &o.Spec
	default:
		o := &v1alpha1.MonolithMachineTemplate{ObjectMeta: meta}
		obj, target = o, &o.Spec.Template.Spec
	}
	if json.Unmarshal(spec, target) != nil {
		return nil
	}
	return obj
}

// FuzzInfraWebhooks sends random and mutated specs of every infra kind
// through defaulting and validation, on create and on update: no panic,
// and every rejection is a field error. `make fuzz` runs it for long;
// `go test` runs the seeds.
func FuzzInfraWebhooks(f *testing.F) {
	seeds := []string{
		`{"backend":{"docker":{"network":"kind","loadBalancerHostPort":30000}},"controlPlaneEndpoint":{"host":"10.0.0.1","port":6443}}`,
		`{"backend":{"docker":{"network":"host"}}}`,
		`{"backend":{"inMemory":{"nodeCIDR":"10.128.0.0/33"}},"failureDomains":[{"name":"a"},{"name":"a"}]}`,
		`{"backend":{"inMemory":{"provisioningDelay":"-1s","bootstrapDelay":"99999h"}},"addressesFromPools":[{"apiGroup":"ipam.cluster.x-k8s.io","kind":"MonolithIPPool","name":"p"},{}]}`,
		`{"backend":{"docker":{"image":"x"},"inMemory":{}},"providerID":"docker:////m","failureDomain":"fd"}`,
		`{}`,
	}
	for i, s := range seeds {
		f.Add(uint8(i), []byte(s), []byte(seeds[(i+1)%len(seeds)]))
	}
	ctx := context.Background()
	defaulter, validator := webhooks.Defaulter{}, &webhooks.Validator{}
	f.Fuzz(func(t *testing.T, kind uint8, spec, oldSpec []byte) {
		obj := fuzzObject(kind, spec)
		if obj == nil {
			return
		}
		// Defaulting (cluster kinds only) never fails on an object of its
		// kind.
		if kind%4 < 2 {
			if err := defaulter.Default(ctx, obj); err != nil {
				t.Fatalf("defaulting failed: %v", err)
			}
		}
		_, err := validator.ValidateCreate(ctx, obj)
		envtest.ExpectFieldErrors(t, err)
		if old := fuzzObject(kind, oldSpec); old != nil {
			_, err = validator.ValidateUpdate(ctx, old, obj)
			envtest.ExpectFieldErrors(t, err)
		}
		_, err = validator.ValidateDelete(ctx, obj)
		envtest.ExpectFieldErrors(t, err)
	})
}
