package webhooks

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"
)

// ExtensionConfig says where Cluster API core finds dev's runtime extension.
type ExtensionConfig struct {
	// Name of the ExtensionConfig.
	Name string
	// URL is the extension's base URL (https://host:port).
	URL string
	// CABundle verifies the extension's serving certificate.
	CABundle []byte
	// Owner names the dev process (see OwnerAnnotation).
	Owner string
}

// ApplyExtensionConfig creates the ExtensionConfig, or points one left by an
// earlier run on the same data at this run's URL and CA. Cluster API core's
// ExtensionConfig controller writes the same object (discovery results,
// conditions) at any moment, so an update that lost that race is retried
// on the latest version rather than failing dev's start.
func ApplyExtensionConfig(ctx context.Context, c client.Client, ext ExtensionConfig) error {
	clientConfig := runtimev1.ClientConfig{URL: ext.URL, CABundle: ext.CABundle}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ec := &runtimev1.ExtensionConfig{}
		err := c.Get(ctx, client.ObjectKey{Name: ext.Name}, ec)
		if apierrors.IsNotFound(err) {
			ec = &runtimev1.ExtensionConfig{
				ObjectMeta: metav1.ObjectMeta{Name: ext.Name},
				Spec: runtimev1.ExtensionConfigSpec{
					ClientConfig:      clientConfig,
					NamespaceSelector: &metav1.LabelSelector{},
				},
			}
			MarkObject(ec, ext.Owner)
			return c.Create(ctx, ec)
		}
		if err != nil {
			return err
		}
		ec.Spec.ClientConfig = clientConfig
		MarkObject(ec, ext.Owner)
		return c.Update(ctx, ec)
	})
	if err != nil {
		return fmt.Errorf("failed to register ExtensionConfig %s: %w", ext.Name, err)
	}
	return nil
}
