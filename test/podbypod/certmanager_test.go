package podbypod_test

import (
	"context"
	"fmt"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/capi-monolith/capi-monolith/dev/certs"
)

// injectAnnotation is cert-manager's cainjector annotation.
const injectAnnotation = "cert-manager.io/inject-ca-from"

// playCertManager does what cert-manager would for the installed
// components: every Certificate's Secret (tls.crt, tls.key, ca.crt for its
// dnsNames, signed by ca), and ca injected into every webhook configuration
// and CRD conversion that asks for it.
func playCertManager(ctx context.Context, c crclient.Client, ca *certs.CA) error {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(schema.GroupVersionKind{Group: "cert-manager.io", Version: "v1", Kind: "CertificateList"})
	if err := c.List(ctx, list); err != nil {
		return fmt.Errorf("failed to list Certificates: %w", err)
	}
	for _, cert := range list.Items {
		dns, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
		secretName, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
		pair, err := ca.Serving(dns...)
		if err != nil {
			return err
		}
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: cert.GetNamespace(), Name: secretName}}
		if _, err := controllerutil.CreateOrUpdate(ctx, c, s, func() error {
			if len(s.Data["tls.crt"]) > 0 {
				return nil
			}
			s.Type = corev1.SecretTypeTLS
			s.Data = map[string][]byte{"tls.crt": pair.CertPEM, "tls.key": pair.KeyPEM, "ca.crt": ca.PEM}
			return nil
		}); err != nil {
			return fmt.Errorf("failed to write the Secret of Certificate %s/%s: %w", cert.GetNamespace(), cert.GetName(), err)
		}
	}
	return injectCA(ctx, c, ca.PEM)
}

func injectCA(ctx context.Context, c crclient.Client, caPEM []byte) error {
	vwcs := &admissionregistrationv1.ValidatingWebhookConfigurationList{}
	if err := c.List(ctx, vwcs); err != nil {
		return err
	}
	for i := range vwcs.Items {
		w := &vwcs.Items[i]
		if w.Annotations[injectAnnotation] == "" {
			continue
		}
		for j := range w.Webhooks {
			w.Webhooks[j].ClientConfig.CABundle = caPEM
		}
		if err := c.Update(ctx, w); err != nil {
			return fmt.Errorf("failed to inject the CA into %s: %w", w.Name, err)
		}
	}
	mwcs := &admissionregistrationv1.MutatingWebhookConfigurationList{}
	if err := c.List(ctx, mwcs); err != nil {
		return err
	}
	for i := range mwcs.Items {
		w := &mwcs.Items[i]
		if w.Annotations[injectAnnotation] == "" {
			continue
		}
		for j := range w.Webhooks {
			w.Webhooks[j].ClientConfig.CABundle = caPEM
		}
		if err := c.Update(ctx, w); err != nil {
			return fmt.Errorf("failed to inject the CA into %s: %w", w.Name, err)
		}
	}
	crds := &apiextensionsv1.CustomResourceDefinitionList{}
	if err := c.List(ctx, crds); err != nil {
		return err
	}
	for i := range crds.Items {
		crd := &crds.Items[i]
		if crd.Annotations[injectAnnotation] == "" || crd.Spec.Conversion == nil || crd.Spec.Conversion.Webhook == nil ||
			crd.Spec.Conversion.Webhook.ClientConfig == nil || strings.HasSuffix(crd.Name, ".cert-manager.io") {
			continue
		}
		crd.Spec.Conversion.Webhook.ClientConfig.CABundle = caPEM
		if err := c.Update(ctx, crd); err != nil {
			return fmt.Errorf("failed to inject the CA into CRD %s: %w", crd.Name, err)
		}
	}
	return nil
}
