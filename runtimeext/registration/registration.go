// Package registration registers the extension with Cluster API: at start-up
// it server-side applies an ExtensionConfig (runtime.cluster.x-k8s.io/v1beta2)
// pointing at the Service in front of the webhook port, with Cluster API's
// inject-ca-from-secret annotation so that core fills in the CA bundle itself.
//
// It is a runnable rather than a manifest because a components file cannot
// carry it: clusterctl init installs providers before core's webhooks for
// ExtensionConfig serve, and --target-namespace would leave the Service
// namespace stale. It retries with backoff until applied and never deletes
// the object: a restarting extension must not make Cluster API forget its
// handlers.
package registration

import (
	"context"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"
)

// Defaults of the registration flags.
const (
	DefaultName          = "monolith"
	DefaultServiceName   = "capi-monolith-webhook-service"
	DefaultServicePort   = 443
	DefaultCASecret      = "capi-monolith-webhook-service-cert"
	FieldOwner           = "capi-monolith-runtimeext"
	InjectCAAnnotation   = "runtime.cluster.x-k8s.io/inject-ca-from-secret"
	defaultInitialDelay  = time.Second
	defaultMaxRetryDelay = time.Minute
)

// Options describe the ExtensionConfig to register.
type Options struct {
	// Name of the ExtensionConfig; empty means do not register.
	Name string
	// Namespace is where the Service and the CA Secret live (POD_NAMESPACE).
	Namespace string
	// ServiceName and ServicePort are the Service in Namespace that fronts
	// the webhook port.
	ServiceName string
	ServicePort int32
	// CASecret is the serving certificate Secret in Namespace whose ca.crt
	// Cluster API injects.
	CASecret string
	// NamespaceSelector is a label selector of the namespaces whose Clusters
	// the hooks apply to; empty means all.
	NamespaceSelector string
	// Settings become spec.settings; nil leaves them to whoever edits the
	// object (server-side apply keeps fields others own).
	Settings map[string]string

	// InitialRetryDelay and MaxRetryDelay bound the backoff between tries.
	// Defaults: 1s and 1m.
	InitialRetryDelay, MaxRetryDelay time.Duration
}

// Validate reports every option that cannot work; a disabled registration
// (empty Name) is always valid.
func (o Options) Validate() error {
	if o.Name == "" {
		return nil
	}
	var errs []error
	if msgs := validation.IsDNS1123Subdomain(o.Name); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("--runtimeext-extension-config-name %q: %v", o.Name, msgs))
	}
	if msgs := validation.IsDNS1035Label(o.ServiceName); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("--runtimeext-service-name %q: %v", o.ServiceName, msgs))
	}
	if o.ServicePort < 1 || o.ServicePort > 65535 {
		errs = append(errs, fmt.Errorf("--runtimeext-service-port must be between 1 and 65535, got %d", o.ServicePort))
	}
	if msgs := validation.IsDNS1123Subdomain(o.CASecret); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("--runtimeext-ca-secret %q: %v", o.CASecret, msgs))
	}
	if _, err := labels.Parse(o.NamespaceSelector); err != nil {
		errs = append(errs, fmt.Errorf("--runtimeext-namespace-selector %q: %w", o.NamespaceSelector, err))
	}
	return errors.Join(errs...)
}

// ExtensionConfig returns the object Register applies.
func (o Options) ExtensionConfig() (*runtimev1.ExtensionConfig, error) {
	sel, err := metav1.ParseToLabelSelector(o.NamespaceSelector)
	if err != nil {
		return nil, fmt.Errorf("failed to parse the namespace selector %q: %w", o.NamespaceSelector, err)
	}
	ec := &runtimev1.ExtensionConfig{
		TypeMeta: metav1.TypeMeta{APIVersion: runtimev1.GroupVersion.String(), Kind: "ExtensionConfig"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        o.Name,
			Annotations: map[string]string{InjectCAAnnotation: o.Namespace + "/" + o.CASecret},
			Labels:      map[string]string{"app.kubernetes.io/managed-by": "capi-monolith"},
		},
		Spec: runtimev1.ExtensionConfigSpec{
			ClientConfig: runtimev1.ClientConfig{
				Service: runtimev1.ServiceReference{
					Namespace: o.Namespace,
					Name:      o.ServiceName,
					Port:      ptr.To(o.ServicePort),
				},
			},
			NamespaceSelector: sel,
			Settings:          o.Settings,
		},
	}
	return ec, nil
}

// Registrar applies the ExtensionConfig once the webhook server serves.
type Registrar struct {
	Client  client.Client
	Options Options
	// Serving reports whether the webhook server answers TLS; registration
	// waits for it so that Cluster API's first discovery succeeds.
	Serving healthz.Checker
}

var (
	_ manager.Runnable               = &Registrar{}
	_ manager.LeaderElectionRunnable = &Registrar{}
)

// NeedLeaderElection is false: every replica serves hooks and the apply is
// idempotent, so registration must not wait for a lease.
func (r *Registrar) NeedLeaderElection() bool { return false }

// Start applies the ExtensionConfig with backoff until it succeeds or ctx
// ends, then returns nil (a runnable that returns does not stop the
// manager).
func (r *Registrar) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithValues("ExtensionConfig", r.Options.Name)
	initial := r.Options.InitialRetryDelay
	if initial <= 0 {
		initial = defaultInitialDelay
	}
	maxDelay := r.Options.MaxRetryDelay
	if maxDelay <= 0 {
		maxDelay = defaultMaxRetryDelay
	}
	backoff := wait.Backoff{Duration: initial, Factor: 2, Jitter: 0.1, Steps: 1 << 30, Cap: maxDelay}
	err := wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
		if r.Serving != nil {
			if err := r.Serving(nil); err != nil {
				log.V(2).Info("Waiting for the webhook server before registering", "reason", err.Error())
				return false, nil
			}
		}
		if err := r.Apply(ctx); err != nil {
			log.Info("Failed to register the extension, retrying", "error", err.Error())
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("failed to register ExtensionConfig %s: %w", r.Options.Name, err)
	}
	log.Info("Registered the extension with Cluster API")
	return nil
}

// Apply server-side applies the ExtensionConfig once.
func (r *Registrar) Apply(ctx context.Context) error {
	ec, err := r.Options.ExtensionConfig()
	if err != nil {
		return err
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ec)
	if err != nil {
		return fmt.Errorf("failed to convert ExtensionConfig %s: %w", ec.Name, err)
	}
	// Cluster API generates no apply configurations: apply the unstructured
	// form, which carries only the fields set above.
	obj := client.ApplyConfigurationFromUnstructured(&unstructured.Unstructured{Object: u})
	if err := r.Client.Apply(ctx, obj, client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("failed to apply ExtensionConfig %s: %w", ec.Name, err)
	}
	return nil
}
