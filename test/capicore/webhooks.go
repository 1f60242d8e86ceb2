package capicore

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// webhookConfigurations are Cluster API core's admission webhook
// configurations, rewritten to call one process over loopback.
type webhookConfigurations struct {
	mutating   *admissionregistrationv1.MutatingWebhookConfiguration
	validating *admissionregistrationv1.ValidatingWebhookConfiguration
}

// readWebhookConfigurations reads core/config/webhook/manifests.yaml and points
// every webhook at baseURL (https://127.0.0.1:<port>) with caBundle. The
// manifests name a Service the process does not have; the path is kept.
func readWebhookConfigurations(path, name, baseURL string, caBundle []byte) (*webhookConfigurations, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("failed to read Cluster API's webhook manifests: %w", err)
	}
	out := &webhookConfigurations{}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("failed to split %s: %w", path, err)
		}
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			return nil, fmt.Errorf("failed to read a document of %s: %w", path, err)
		}
		switch meta.Kind {
		case "MutatingWebhookConfiguration":
			out.mutating = &admissionregistrationv1.MutatingWebhookConfiguration{}
			if err := yaml.UnmarshalStrict(doc, out.mutating); err != nil {
				return nil, fmt.Errorf("failed to decode the MutatingWebhookConfiguration of %s: %w", path, err)
			}
			for i := range out.mutating.Webhooks {
				if err := pointAt(&out.mutating.Webhooks[i].ClientConfig, baseURL, caBundle); err != nil {
					return nil, fmt.Errorf("failed to rewrite webhook %s: %w", out.mutating.Webhooks[i].Name, err)
				}
			}
			out.mutating.ObjectMeta = metav1.ObjectMeta{Name: name}
		case "ValidatingWebhookConfiguration":
			out.validating = &admissionregistrationv1.ValidatingWebhookConfiguration{}
			if err := yaml.UnmarshalStrict(doc, out.validating); err != nil {
				return nil, fmt.Errorf("failed to decode the ValidatingWebhookConfiguration of %s: %w", path, err)
			}
			for i := range out.validating.Webhooks {
				if err := pointAt(&out.validating.Webhooks[i].ClientConfig, baseURL, caBundle); err != nil {
					return nil, fmt.Errorf("failed to rewrite webhook %s: %w", out.validating.Webhooks[i].Name, err)
				}
			}
			out.validating.ObjectMeta = metav1.ObjectMeta{Name: name}
		case "":
			// An empty document, e.g. after a leading "---".
		default:
			return nil, fmt.Errorf("failed to read %s: unexpected kind %q", path, meta.Kind)
		}
	}
	if out.mutating == nil || out.validating == nil {
		return nil, fmt.Errorf("failed to read %s: want one mutating and one validating webhook configuration", path)
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

func (w *webhookConfigurations) install(ctx context.Context, c client.Client) error {
	if err := c.Create(ctx, w.mutating); err != nil {
		return fmt.Errorf("failed to create MutatingWebhookConfiguration %s: %w", w.mutating.Name, err)
	}
	if err := c.Create(ctx, w.validating); err != nil {
		return fmt.Errorf("failed to create ValidatingWebhookConfiguration %s: %w", w.validating.Name, err)
	}
	return nil
}

func (w *webhookConfigurations) delete(ctx context.Context, c client.Client) error {
	var errs []error
	for _, obj := range []client.Object{w.mutating, w.validating} {
		if err := c.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("failed to delete %T %s: %w", obj, obj.GetName(), err))
		}
	}
	return errors.Join(errs...)
}

// conversionPatch records what a CRD's conversion was before Start pointed it
// at the process, to give it back on Stop.
type conversionPatch struct {
	name     string
	original *apiextensionsv1.CustomResourceConversion
}

// crdNames returns the names of the CRDs in dir (Cluster API core's CRD bases).
func crdNames(dir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, fmt.Errorf("failed to list Cluster API's CRDs: %w", err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("failed to list Cluster API's CRDs: none in %s", dir)
	}
	names := make([]string, 0, len(files))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("failed to read CRD file: %w", err)
		}
		var meta metav1.PartialObjectMetadata
		if err := yaml.Unmarshal(data, &meta); err != nil {
			return nil, fmt.Errorf("failed to read CRD file %s: %w", f, err)
		}
		names = append(names, meta.Name)
	}
	return names, nil
}

// useConversionWebhook points the conversion of the named CRDs at url. It
// returns what it changed, also when it fails half way, so that the caller can
// undo it.
func useConversionWebhook(ctx context.Context, c client.Client, names []string, url string, caBundle []byte) ([]conversionPatch, error) {
	var done []conversionPatch
	for _, name := range names {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			return done, fmt.Errorf("failed to get CRD %s (start the apiserver with test/envtest, which installs Cluster API's CRDs): %w", name, err)
		}
		base := crd.DeepCopy()
		crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{
			Strategy: apiextensionsv1.WebhookConverter,
			Webhook: &apiextensionsv1.WebhookConversion{
				ClientConfig:             &apiextensionsv1.WebhookClientConfig{URL: &url, CABundle: caBundle},
				ConversionReviewVersions: []string{"v1", "v1beta1"},
			},
		}
		// A merge patch touches spec.conversion only, so it cannot race with
		// the status and annotation updates of core's CRD migrator.
		if err := c.Patch(ctx, crd, client.MergeFrom(base)); err != nil {
			return done, fmt.Errorf("failed to set the conversion webhook of CRD %s: %w", name, err)
		}
		done = append(done, conversionPatch{name: name, original: base.Spec.Conversion})
	}
	return done, nil
}

// restoreConversion gives every CRD its original conversion back, unless
// something else (another process) changed it since.
func restoreConversion(ctx context.Context, c client.Client, patches []conversionPatch, url string) error {
	var errs []error
	for _, p := range patches {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: p.name}, crd); err != nil {
			if !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("failed to get CRD %s: %w", p.name, err))
			}
			continue
		}
		conv := crd.Spec.Conversion
		if conv == nil || conv.Webhook == nil || conv.Webhook.ClientConfig == nil ||
			conv.Webhook.ClientConfig.URL == nil || *conv.Webhook.ClientConfig.URL != url {
			continue
		}
		base := crd.DeepCopy()
		crd.Spec.Conversion = p.original
		if err := c.Patch(ctx, crd, client.MergeFrom(base)); err != nil {
			errs = append(errs, fmt.Errorf("failed to restore the conversion of CRD %s: %w", p.name, err))
		}
	}
	return errors.Join(errs...)
}
