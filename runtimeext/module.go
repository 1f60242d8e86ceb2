// Package runtimeext is the runtimeext module of capi-monolith: a Cluster API
// Runtime SDK extension serving every hook of Cluster API v1.14's catalog over
// HTTPS on the manager's one webhook server (see package serving), with
// policies for lifecycle hooks (hold, IP capacity, record), topology
// mutation for the infra module's template kinds, upgrade plans and in-place
// updates. Cluster API calls it through an ExtensionConfig: with
// --runtimeext-self-register (set by the bundles), one it creates at start-up,
// owned by the bundle's ClusterRole so that uninstalling removes it (see
// package registration); otherwise one the admin applies.
package runtimeext

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"

	ipamv1alpha1 "github.com/capi-monolith/capi-monolith/ipam/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/modules"
	"github.com/capi-monolith/capi-monolith/runtimeext/internal/handlers"
	"github.com/capi-monolith/capi-monolith/runtimeext/internal/record"
	"github.com/capi-monolith/capi-monolith/runtimeext/internal/registration"
	"github.com/capi-monolith/capi-monolith/runtimeext/internal/scope"
	"github.com/capi-monolith/capi-monolith/runtimeext/internal/serving"
	"github.com/capi-monolith/capi-monolith/runtimeext/internal/workloadnodes"
)

// Name is the value of --enable-modules that turns this module on.
const Name = "runtimeext"

// NamespaceEnv names the environment variable holding the namespace the
// manager runs in (the Deployment sets it from the downward API).
const NamespaceEnv = "POD_NAMESPACE"

// EventSource is the source of the Events the hooks record.
const EventSource = "capi-monolith-runtimeext"

// Options are the runtimeext module's settings.
type Options struct {
	// Registration is the ExtensionConfig --runtimeext-self-register
	// creates; an empty Registration.Name registers none.
	Registration RegistrationOptions
	// SelfRegister creates the ExtensionConfig at start-up when it is
	// missing (never changing an existing one); off, the admin applies it.
	SelfRegister bool
	// ClientCAFile, when set, makes hook calls present a client
	// certificate it signed (mTLS).
	ClientCAFile string
}

// RegistrationOptions describe the ExtensionConfig the module creates when
// self-registration is on.
type RegistrationOptions struct {
	// Name of the ExtensionConfig; empty means do not register.
	Name string
	// ServiceName and ServicePort are the Service in $POD_NAMESPACE that
	// fronts the webhook port.
	ServiceName string
	ServicePort int32
	// CASecret is the serving certificate Secret in $POD_NAMESPACE whose
	// ca.crt Cluster API injects.
	CASecret string
	// NamespaceSelector is a label selector of the namespaces whose
	// Clusters the hooks apply to; empty means all.
	NamespaceSelector string
	// Owner names the ClusterRole that owns the created ExtensionConfig
	// (the bundle's own, so that removing the provider removes it); empty
	// for none.
	Owner string
}

// registration returns the registrar's options, in namespace.
func (o RegistrationOptions) registration(namespace string) registration.Options {
	return registration.Options{
		Name:              o.Name,
		Namespace:         namespace,
		ServiceName:       o.ServiceName,
		ServicePort:       o.ServicePort,
		CASecret:          o.CASecret,
		NamespaceSelector: o.NamespaceSelector,
		Owner:             o.Owner,
	}
}

// Register creates the ExtensionConfig once, as --runtimeext-self-register
// does at start-up, with c, for the Service in namespace: when missing, or
// when owned by an earlier ClusterRole named like the owner.
func (o Options) Register(ctx context.Context, c client.Client, namespace string) error {
	return (&registration.Registrar{Client: c, Options: o.Registration.registration(namespace)}).Ensure(ctx)
}

// DefaultOptions returns the options the flags default to.
func DefaultOptions() Options {
	return Options{Registration: RegistrationOptions{
		Name:        registration.DefaultName,
		ServiceName: registration.DefaultServiceName,
		ServicePort: registration.DefaultServicePort,
		CASecret:    registration.DefaultCASecret,
		// Only namespaces that opt in with the documented label.
		NamespaceSelector: registration.DefaultNamespaceSelector,
	}}
}

// BindFlags binds o to fs; o's values are the flags' defaults.
func (o *Options) BindFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.SelfRegister, "runtimeext-self-register", o.SelfRegister,
		"Create the ExtensionConfig at start-up when it is missing (never changing an existing one); off, the admin applies it. Needs RBAC to get and create it.")
	fs.StringVar(&o.Registration.Name, "runtimeext-extension-config-name", o.Registration.Name,
		"Name of the ExtensionConfig --runtimeext-self-register creates; empty registers none.")
	fs.StringVar(&o.Registration.ServiceName, "runtimeext-service-name", o.Registration.ServiceName,
		"Service in $POD_NAMESPACE that fronts the webhook port, named in the ExtensionConfig.")
	fs.Int32Var(&o.Registration.ServicePort, "runtimeext-service-port", o.Registration.ServicePort,
		"Port of --runtimeext-service-name.")
	fs.StringVar(&o.Registration.CASecret, "runtimeext-ca-secret", o.Registration.CASecret,
		"Serving certificate Secret in $POD_NAMESPACE whose ca.crt Cluster API injects into the ExtensionConfig.")
	fs.StringVar(&o.Registration.NamespaceSelector, "runtimeext-namespace-selector", o.Registration.NamespaceSelector,
		"Label selector of the namespaces whose Clusters the hooks apply to (spec.namespaceSelector of a self-registered ExtensionConfig); empty means all.")
	fs.StringVar(&o.Registration.Owner, "runtimeext-extension-config-owner", o.Registration.Owner,
		"ClusterRole that owns the ExtensionConfig --runtimeext-self-register creates, which then carries its clusterctl labels: deleting the ClusterRole (clusterctl delete) makes the garbage collector delete the ExtensionConfig. Needs RBAC to get it; empty for no owner.")
	fs.StringVar(&o.ClientCAFile, "runtimeext-client-ca-file", o.ClientCAFile,
		"CA bundle file; when set, hook calls must present a client certificate it signed (mTLS). Admission webhooks are unaffected.")
}

// Module is the runtimeext module.
type Module struct {
	opts Options
}

var _ modules.Module = &Module{}

// New returns the runtimeext module with opts.
func New(opts Options) *Module { return &Module{opts: opts} }

// WithoutRegistration returns a copy of the module that registers no
// ExtensionConfig, for a caller that registers the extension itself (dev).
func (m *Module) WithoutRegistration() *Module {
	opts := m.opts
	opts.SelfRegister = false
	opts.Registration.Name = ""
	return New(opts)
}

// Name implements modules.Module.
func (*Module) Name() string { return Name }

// NewWebhookServer implements manager.WebhookServerProvider: Cluster API's
// runtime extension server, guarded, serving admission webhooks too.
func (m *Module) NewWebhookServer(opts webhook.Options) (webhook.Server, error) {
	return serving.New(serving.Options{Webhook: opts, ClientCAFile: m.opts.ClientCAFile})
}

// AddToScheme implements modules.Module: the IP pool kinds the capacity gate
// reads and Cluster API's ExtensionConfig.
func (*Module) AddToScheme(scheme *runtime.Scheme) error {
	if err := ipamv1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	return runtimev1.AddToScheme(scheme)
}

// The module reads IP pools and the Clusters hook requests name from the
// shared cache and records Events on Clusters. Self-registration's RBAC (get
// and create of one ExtensionConfig) is not here: it is opt-in, granted by a
// file of its own.
// +kubebuilder:rbac:groups=ipam.cluster.x-k8s.io,resources=monolithippools;globalmonolithippools,verbs=get;list;watch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters,verbs=get;list;watch
// UpdateMachine reads the Machine (for its Node) and the workload cluster's
// kubeconfig Secret, by name.
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines,verbs=get
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// SetupWithManager implements modules.Module.
func (m *Module) SetupWithManager(ctx context.Context, shared modules.Shared) error {
	mgr := shared.Manager
	log := ctrl.LoggerFrom(ctx)
	if err := m.opts.Registration.registration("").Validate(); err != nil {
		return err
	}
	srv, ok := serving.FromManager(mgr)
	if !ok {
		log.Info("Runtime hooks are not served: the webhook server is off (--webhook-port=0)")
		return nil
	}
	// Hooks about Clusters this manager does not watch get the neutral
	// answer and no Event, as its controllers leave those Clusters alone.
	inScope := scope.Scope{Namespace: shared.Options.WatchNamespace, WatchFilterValue: shared.Options.WatchFilterValue}
	list, err := handlers.List(handlers.Options{
		Reader:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Recorder:  &record.Recorder{Events: mgr.GetEventRecorder(EventSource), Scope: inScope},
		Scope:     inScope,
		Nodes:     &workloadnodes.Reader{Management: mgr.GetAPIReader(), Source: EventSource},
	})
	if err != nil {
		return err
	}
	if err := serving.AddHandlers(srv, list); err != nil {
		return fmt.Errorf("failed to add the runtime hook handlers: %w", err)
	}
	// Start the pool informers with the cache, so that the first
	// BeforeClusterCreate does not wait for a list. Without the ipam
	// module's CRDs the gate reports that it cannot read pools.
	for _, obj := range []client.Object{&ipamv1alpha1.MonolithIPPool{}, &ipamv1alpha1.GlobalMonolithIPPool{}} {
		if _, err := mgr.GetCache().GetInformer(ctx, obj, cache.BlockUntilSynced(false)); err != nil {
			log.Error(err, "IP pools cannot be watched: the IP capacity gate will report it", "kind", fmt.Sprintf("%T", obj))
		}
	}
	return m.setupRegistration(ctx, mgr, srv.StartedChecker())
}

func (m *Module) setupRegistration(ctx context.Context, mgr ctrl.Manager, ready healthz.Checker) error {
	log := ctrl.LoggerFrom(ctx)
	if !m.opts.SelfRegister {
		log.V(1).Info("Not registering an ExtensionConfig: --runtimeext-self-register is off")
		return nil
	}
	if m.opts.Registration.Name == "" {
		log.Info("Not registering an ExtensionConfig: --runtimeext-extension-config-name is empty")
		return nil
	}
	opts := m.opts.Registration.registration(os.Getenv(NamespaceEnv))
	if opts.Namespace == "" {
		log.Info("Not registering an ExtensionConfig: " + NamespaceEnv + " is not set")
		return nil
	}
	// A client without the manager's cache: the RBAC allows only get of
	// the one ExtensionConfig and the one ClusterRole, by name, and a
	// cached read would list and watch every one of them (forbidden).
	direct, err := client.New(mgr.GetConfig(), client.Options{
		Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(), HTTPClient: mgr.GetHTTPClient(),
	})
	if err != nil {
		return fmt.Errorf("failed to create the registration's client: %w", err)
	}
	return mgr.Add(&registration.Registrar{Client: direct, Options: opts, Serving: ready})
}
