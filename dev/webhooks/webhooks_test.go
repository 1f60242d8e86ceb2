package webhooks_test

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/capi-monolith/capi-monolith/dev/webhooks"
)

const manifests = `---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: mutating-webhook-configuration
webhooks:
- admissionReviewVersions: [v1]
  clientConfig:
    service: {name: webhook-service, namespace: system, path: /mutate-x}
  failurePolicy: Fail
  name: default.x.example.com
  sideEffects: None
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: validating-webhook-configuration
webhooks:
- admissionReviewVersions: [v1]
  clientConfig:
    service: {name: webhook-service, namespace: system, path: /validate-x}
  failurePolicy: Fail
  name: validation.x.example.com
  sideEffects: None
`

func TestReadPointsEveryWebhookAtTheURLWithItsPath(t *testing.T) {
	g := NewWithT(t)
	got, err := webhooks.Read([]byte(manifests), "test", "dev-x", "https://127.0.0.1:9443", []byte("CA"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Mutating.Name).To(Equal("dev-x"))
	g.Expect(got.Validating.Name).To(Equal("dev-x"))
	g.Expect(got.Mutating.Webhooks[0].ClientConfig.Service).To(BeNil())
	g.Expect(got.Mutating.Webhooks[0].ClientConfig.URL).To(HaveValue(Equal("https://127.0.0.1:9443/mutate-x")))
	g.Expect(got.Validating.Webhooks[0].ClientConfig.URL).To(HaveValue(Equal("https://127.0.0.1:9443/validate-x")))
	g.Expect(got.Validating.Webhooks[0].ClientConfig.CABundle).To(Equal([]byte("CA")))
}

func TestReadRejectsWhatItCannotRewrite(t *testing.T) {
	tests := []struct {
		name, manifests, wantErr string
	}{
		{name: "another kind is refused", manifests: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n", wantErr: `unexpected kind "ConfigMap"`},
		{name: "no configuration at all is refused", manifests: "---\n", wantErr: "holds no webhook configuration"},
		{name: "a webhook without a service path is refused", manifests: "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\nmetadata: {name: v}\nwebhooks:\n- name: a.b.c\n  clientConfig: {url: https://x}\n  sideEffects: None\n  admissionReviewVersions: [v1]\n", wantErr: "names no service path"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := webhooks.Read([]byte(tt.manifests), "test", "n", "https://127.0.0.1:1", nil)
			g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
		})
	}
}
