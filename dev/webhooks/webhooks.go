// Package webhooks points admission and conversion webhooks written for an
// in-cluster Service (controller-gen's output, Cluster API core's manifests)
// at a process serving them on loopback, as the dev environment runs them.
package webhooks

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// Configurations are the admission webhook configurations of one server,
// rewritten to call it at a URL. Either may be nil when the manifests have
// none of that kind.
type Configurations struct {
	Mutating   *admissionregistrationv1.MutatingWebhookConfiguration
	Validating *admissionregistrationv1.ValidatingWebhookConfiguration
}

// Read decodes manifests (a multi-document YAML of webhook configurations),
// names both configurations name and points every webhook at baseURL
// (https://127.0.0.1:<port>) plus the path its Service reference had, trusting
// caBundle. source names the manifests in errors.
func Read(manifests []byte, source, name, baseURL string, caBundle []byte) (*Configurations, error) {
	out := &Configurations{}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(manifests)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("failed to split %s: %w", source, err)
		}
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			return nil, fmt.Errorf("failed to read a document of %s: %w", source, err)
		}
		switch meta.Kind {
		case "MutatingWebhookConfiguration":
			out.Mutating = &admissionregistrationv1.MutatingWebhookConfiguration{}
			if err := yaml.UnmarshalStrict(doc, out.Mutating); err != nil {
				return nil, fmt.Errorf("failed to decode the MutatingWebhookConfiguration of %s: %w", source, err)
			}
			for i := range out.Mutating.Webhooks {
				if err := pointAt(&out.Mutating.Webhooks[i].ClientConfig, baseURL, caBundle); err != nil {
					return nil, fmt.Errorf("failed to rewrite webhook %s of %s: %w", out.Mutating.Webhooks[i].Name, source, err)
				}
			}
			out.Mutating.ObjectMeta = metav1.ObjectMeta{Name: name}
		case "ValidatingWebhookConfiguration":
			out.Validating = &admissionregistrationv1.ValidatingWebhookConfiguration{}
			if err := yaml.UnmarshalStrict(doc, out.Validating); err != nil {
				return nil, fmt.Errorf("failed to decode the ValidatingWebhookConfiguration of %s: %w", source, err)
			}
			for i := range out.Validating.Webhooks {
				if err := pointAt(&out.Validating.Webhooks[i].ClientConfig, baseURL, caBundle); err != nil {
					return nil, fmt.Errorf("failed to rewrite webhook %s of %s: %w", out.Validating.Webhooks[i].Name, source, err)
				}
			}
			out.Validating.ObjectMeta = metav1.ObjectMeta{Name: name}
		case "":
			// An empty document, e.g. after a leading "---".
		default:
			return nil, fmt.Errorf("failed to read %s: unexpected kind %q", source, meta.Kind)
		}
	}
	if out.Mutating == nil && out.Validating == nil {
		return nil, fmt.Errorf("failed to read %s: it holds no webhook configuration", source)
	}
	return out, nil
}

func pointAt(cc *admissionregistrationv1.WebhookClientConfig, baseURL string, caBundle []byte) error {
	if cc.Service == nil || cc.Service.Path == nil {
		return fmt.Errorf("failed to rewrite the client config: it names no service path")
	}
	url := baseURL + *cc.Service.Path
	*cc = admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: caBundle}
	return nil
}

func (w *Configurations) objects() []client.Object {
	var objs []client.Object
	if w.Mutating != nil {
		objs = append(objs, w.Mutating)
	}
	if w.Validating != nil {
		objs = append(objs, w.Validating)
	}
	return objs
}

// Create creates the configurations; it fails when one exists already.
func (w *Configurations) Create(ctx context.Context, c client.Client) error {
	for _, obj := range w.objects() {
		if err := c.Create(ctx, obj); err != nil {
			return fmt.Errorf("failed to create %T %s: %w", obj, obj.GetName(), err)
		}
	}
	return nil
}

// Apply creates the configurations, or replaces the ones of the same name
// (left by an earlier run on the same data).
func (w *Configurations) Apply(ctx context.Context, c client.Client) error {
	for _, obj := range w.objects() {
		err := c.Create(ctx, obj)
		if apierrors.IsAlreadyExists(err) {
			existing := obj.DeepCopyObject().(client.Object)
			if err = c.Get(ctx, client.ObjectKeyFromObject(obj), existing); err == nil {
				obj.SetResourceVersion(existing.GetResourceVersion())
				err = c.Update(ctx, obj)
			}
		}
		if err != nil {
			return fmt.Errorf("failed to apply %T %s: %w", obj, obj.GetName(), err)
		}
	}
	return nil
}

// Delete deletes the configurations; missing ones are fine.
func (w *Configurations) Delete(ctx context.Context, c client.Client) error {
	var errs []error
	for _, obj := range w.objects() {
		if err := c.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("failed to delete %T %s: %w", obj, obj.GetName(), err))
		}
	}
	return errors.Join(errs...)
}

// CheckTLS proves that addr serves a certificate roots trust for 127.0.0.1,
// the address the apiserver calls.
func CheckTLS(ctx context.Context, addr string, roots *x509.CertPool) error {
	dialer := &tls.Dialer{
		NetDialer: &net.Dialer{Timeout: time.Second},
		Config:    &tls.Config{RootCAs: roots, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12},
	}
	conn, err := dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("failed to reach the webhook server at %s over TLS: %w", addr, err)
	}
	return conn.Close()
}
