// Package registration is the runtimeext module's opt-in self-registration
// with Cluster API: at start-up it creates an ExtensionConfig
// (runtime.cluster.x-k8s.io/v1beta2) pointing at the Service in front of the
// webhook port, with Cluster API's inject-ca-from-secret annotation so that
// core fills in the CA bundle itself, when none of that name exists.
//
// A components file cannot carry the ExtensionConfig (clusterctl init
// installs providers before core's webhooks for ExtensionConfig serve), so
// the bundles turn self-registration on. Its fields stay the
// administrator's: registration only creates a missing object and
// never patches an existing one, so an admin's edits (selector, settings,
// failure policy of their own) survive every restart. It retries with
// backoff until done and never deletes a live one: a restarting extension
// must not make Cluster API forget its handlers.
//
// With an owner (Options.Owner: the provider's own ClusterRole, which
// `clusterctl delete` and `kubectl delete -f` remove) the created object is
// owned by it and carries its clusterctl labels, so Kubernetes' garbage
// collector removes the ExtensionConfig with the provider: clusterctl itself
// never lists objects of kinds whose CRDs belong to a provider (Cluster API
// core's ExtensionConfig among them), whatever their labels. An existing
// ExtensionConfig owned by an earlier ClusterRole of that name (a previous
// install or upgrade: the collector is about to remove it) is replaced.
package registration

import (
	"context"
	"errors"
	"fmt"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"

	"github.com/capi-monolith/capi-monolith/runtimeext/api"
)

// Defaults of the registration flags.
const (
	DefaultName        = "monolith"
	DefaultServiceName = "capi-monolith-webhook-service"
	DefaultServicePort = 443
	DefaultCASecret    = "capi-monolith-webhook-service-cert"
	FieldOwner         = "capi-monolith-runtimeext"
	// DefaultNamespaceSelector selects the namespaces that opt in.
	DefaultNamespaceSelector = api.NamespaceOptInLabel + "=true"
	InjectCAAnnotation       = "runtime.cluster.x-k8s.io/inject-ca-from-secret"
	defaultInitialDelay      = time.Second
	defaultMaxRetryDelay     = time.Minute
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
	// the hooks apply to; empty means all (the flag defaults to
	// DefaultNamespaceSelector: only namespaces that opt in).
	NamespaceSelector string
	// Settings become spec.settings of a created object.
	Settings map[string]string
	// Owner names a ClusterRole that owns the created object; empty for
	// none.
	Owner string

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
	if o.Owner != "" {
		if msgs := validation.IsDNS1123Subdomain(o.Owner); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--runtimeext-extension-config-owner %q: %v", o.Owner, msgs))
		}
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

// Registrar creates the ExtensionConfig, when missing, once the webhook
// server serves.
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

// NeedLeaderElection is false: every replica serves hooks and creating a
// missing object is idempotent (the apiserver lets one create win), so
// registration must not wait for a lease.
func (r *Registrar) NeedLeaderElection() bool { return false }

// Start ensures the ExtensionConfig exists, with backoff until it succeeds
// or ctx ends, then returns nil (a runnable that returns does not stop the
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
		if err := r.Ensure(ctx); err != nil {
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

// ownerLabels are the labels an owned ExtensionConfig copies from its
// owner: clusterctl's, which say which provider it belongs to.
var ownerLabels = []string{"clusterctl.cluster.x-k8s.io", clusterv1.ProviderNameLabel}

// own makes owner the controller-less owner of ec and copies its clusterctl
// labels. blockOwnerDeletion stays unset: it would need the right to update
// the ClusterRole's finalizers.
func own(ec *runtimev1.ExtensionConfig, owner *rbacv1.ClusterRole) {
	ec.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: rbacv1.SchemeGroupVersion.String(),
		Kind:       "ClusterRole",
		Name:       owner.Name,
		UID:        owner.UID,
	}}
	for _, k := range ownerLabels {
		if v, ok := owner.Labels[k]; ok {
			ec.Labels[k] = v
		}
	}
}

// staleOwner says whether ec is owned by a ClusterRole named like owner
// that is not owner: one deleted since, whose dependents the garbage
// collector removes.
func staleOwner(ec *runtimev1.ExtensionConfig, owner *rbacv1.ClusterRole) bool {
	for _, ref := range ec.OwnerReferences {
		if ref.Kind == "ClusterRole" && ref.Name == owner.Name && ref.UID != owner.UID {
			return true
		}
	}
	return false
}

// Ensure creates the ExtensionConfig when none of its name exists, and
// leaves an existing one exactly as it is: its fields are the admin's. With
// an owner, an existing one whose owner is gone is replaced.
func (r *Registrar) Ensure(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithValues("ExtensionConfig", r.Options.Name)
	ec, err := r.Options.ExtensionConfig()
	if err != nil {
		return err
	}
	var owner *rbacv1.ClusterRole
	if r.Options.Owner != "" {
		owner = &rbacv1.ClusterRole{}
		if err := r.Client.Get(ctx, client.ObjectKey{Name: r.Options.Owner}, owner); err != nil {
			return fmt.Errorf("failed to read ClusterRole %s, the ExtensionConfig's owner: %w", r.Options.Owner, err)
		}
		own(ec, owner)
	}
	existing := &runtimev1.ExtensionConfig{}
	err = r.Client.Get(ctx, client.ObjectKey{Name: ec.Name}, existing)
	switch {
	case err == nil && owner != nil && staleOwner(existing, owner):
		log.Info("Replacing the ExtensionConfig of an earlier install", "ClusterRole", owner.Name)
		if err := r.Client.Delete(ctx, existing, client.Preconditions{UID: ptr.To(existing.UID)}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("failed to delete ExtensionConfig %s of an earlier install: %w", ec.Name, err)
		}
	case err == nil:
		log.V(1).Info("ExtensionConfig exists; leaving it as it is")
		return nil
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("failed to read ExtensionConfig %s: %w", ec.Name, err)
	}
	if err := r.Client.Create(ctx, ec, client.FieldOwner(FieldOwner)); err != nil {
		if apierrors.IsAlreadyExists(err) {
			// Another replica (or the admin) was first: theirs stands.
			return nil
		}
		return fmt.Errorf("failed to create ExtensionConfig %s: %w", ec.Name, err)
	}
	return nil
}
