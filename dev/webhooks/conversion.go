package webhooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ConversionPatch records what a CRD's conversion was before
// UseConversionWebhook pointed it at a URL, to give it back later.
type ConversionPatch struct {
	Name     string
	Original *apiextensionsv1.CustomResourceConversion
}

// UseConversionWebhook points the conversion of the named CRDs at url. It
// returns what it changed, also when it fails half way, so that the caller can
// undo it with RestoreConversion.
func UseConversionWebhook(ctx context.Context, c client.Client, names []string, url string, caBundle []byte) ([]ConversionPatch, error) {
	var done []ConversionPatch
	for _, name := range names {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			return done, fmt.Errorf("failed to get CRD %s (are Cluster API's CRDs installed?): %w", name, err)
		}
		base := crd.DeepCopy()
		// Record the original on the CRD itself, in the same patch: should
		// this process be killed, Repair finds it there. One recorded
		// already (by a dev killed before any Repair) is the true original.
		if _, recorded := crd.Annotations[OriginalConversionAnnotation]; !recorded {
			original, err := json.Marshal(base.Spec.Conversion)
			if err != nil {
				return done, fmt.Errorf("failed to record the conversion of CRD %s: %w", name, err)
			}
			if crd.Annotations == nil {
				crd.Annotations = map[string]string{}
			}
			crd.Annotations[OriginalConversionAnnotation] = string(original)
		}
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
		done = append(done, ConversionPatch{Name: name, Original: base.Spec.Conversion})
	}
	return done, nil
}

// RestoreConversion gives every CRD its original conversion back, unless
// something else changed it since (it no longer points at url).
func RestoreConversion(ctx context.Context, c client.Client, patches []ConversionPatch, url string) error {
	var errs []error
	for _, p := range patches {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: p.Name}, crd); err != nil {
			if !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("failed to get CRD %s: %w", p.Name, err))
			}
			continue
		}
		conv := crd.Spec.Conversion
		ours := conv != nil && conv.Webhook != nil && conv.Webhook.ClientConfig != nil &&
			conv.Webhook.ClientConfig.URL != nil && *conv.Webhook.ClientConfig.URL == url
		_, recorded := crd.Annotations[OriginalConversionAnnotation]
		if !ours && !recorded {
			continue
		}
		base := crd.DeepCopy()
		delete(crd.Annotations, OriginalConversionAnnotation)
		if ours {
			crd.Spec.Conversion = p.Original
		}
		if err := c.Patch(ctx, crd, client.MergeFrom(base)); err != nil {
			errs = append(errs, fmt.Errorf("failed to restore the conversion of CRD %s: %w", p.Name, err))
		}
	}
	return errors.Join(errs...)
}
