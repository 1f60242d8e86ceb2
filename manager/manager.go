package manager

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/flags"

	"github.com/capi-monolith/capi-monolith/modules"
)

// Manager is the shared controller-runtime manager together with the modules
// that were set up on it.
type Manager struct {
	ctrl.Manager

	// Modules are the enabled modules, in set-up order.
	Modules []modules.Module
}

// NewScheme returns the scheme of a manager running the given modules: the
// Kubernetes built-ins, Cluster API's core types (every module reads
// Clusters for the pause rules) and each module's own types.
func NewScheme(enabled []modules.Module) (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(clusterv1.AddToScheme(scheme))
	for _, m := range enabled {
		if err := m.AddToScheme(scheme); err != nil {
			return nil, fmt.Errorf("failed to add the types of module %q to the scheme: %w", m.Name(), err)
		}
	}
	return scheme, nil
}

// New builds the one manager for mods and sets each of them up on it, in the
// order given (a module that uses another comes after it). opts.EnableModules is not read: callers
// resolve it into modules (the binary through its registry). Nothing runs
// until Start is called.
func New(ctx context.Context, restConfig *rest.Config, opts Options, mods ...modules.Module) (*Manager, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if err := modules.Check(mods); err != nil {
		return nil, err
	}
	enabled := mods
	scheme, err := NewScheme(enabled)
	if err != nil {
		return nil, err
	}

	tlsOptions, metricsOptions, err := flags.GetManagerOptions(opts.Diagnostics)
	if err != nil {
		return nil, fmt.Errorf("invalid diagnostics or TLS flags: %w", err)
	}

	restConfig = rest.CopyConfig(restConfig)
	restConfig.QPS = opts.KubeAPIQPS
	restConfig.Burst = opts.KubeAPIBurst
	restConfig.UserAgent = "capi-monolith"
	countWatches(restConfig)

	var watchNamespaces map[string]cache.Config
	if opts.WatchNamespace != "" {
		watchNamespaces = map[string]cache.Config{opts.WatchNamespace: {}}
	}

	leaderElectionID := opts.LeaderElectionID
	if leaderElectionID == "" {
		leaderElectionID = DefaultLeaderElectionID(enabled)
	}

	ctrlOptions := ctrl.Options{
		Scheme: scheme,
		Controller: config.Controller{
			SkipNameValidation: ptr.To(opts.SkipControllerNameValidation),
			// controller-runtime v0.24's priority queue can deadlock when it
			// shuts down (kubernetes-sigs/controller-runtime#3538, fixed in
			// a later release): a worker and the queue wait on each other and
			// the manager never stops. client-go's workqueue, which the
			// controllers used before the priority queue, stops cleanly.
			UsePriorityQueue: ptr.To(false),
		},
		Cache: cache.Options{
			DefaultNamespaces: watchNamespaces,
			SyncPeriod:        ptr.To(opts.SyncPeriod),
			// Managed fields are never read and are a large share of an
			// object's size: drop them from the shared cache.
			DefaultTransform: cache.TransformStripManagedFields(),
		},
		Client: client.Options{
			Cache: &client.CacheOptions{
				// Secrets hold bootstrap data and kubeconfigs: read them
				// on demand rather than keeping every Secret of the
				// management cluster in memory.
				DisableFor: []client.Object{&corev1.Secret{}, &corev1.ConfigMap{}},
			},
		},
		Metrics:                    *metricsOptions,
		HealthProbeBindAddress:     opts.HealthAddr,
		LeaderElection:             opts.LeaderElect,
		LeaderElectionID:           leaderElectionID,
		LeaderElectionNamespace:    opts.LeaderElectionNamespace,
		LeaderElectionResourceLock: resourcelock.LeasesResourceLock,
		LeaseDuration:              ptr.To(opts.LeaseDuration),
		RenewDeadline:              ptr.To(opts.RenewDeadline),
		RetryPeriod:                ptr.To(opts.RetryPeriod),
	}
	webhooksEnabled := opts.WebhookPort != 0
	if webhooksEnabled {
		ctrlOptions.WebhookServer, err = newWebhookServer(enabled, webhook.Options{
			Host:     opts.WebhookHost,
			Port:     opts.WebhookPort,
			CertDir:  opts.WebhookCertDir,
			CertName: opts.WebhookCertName,
			KeyName:  opts.WebhookKeyName,
			TLSOpts:  tlsOptions,
		})
		if err != nil {
			return nil, err
		}
	}

	mgr, err := ctrl.NewManager(restConfig, ctrlOptions)
	if err != nil {
		return nil, fmt.Errorf("failed to create the manager: %w", err)
	}

	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, fmt.Errorf("failed to add the health check: %w", err)
	}
	if webhooksEnabled {
		// Ready only once the webhook server answers: the API server calls
		// it for every object our webhooks cover.
		if err := mgr.AddReadyzCheck("webhook", mgr.GetWebhookServer().StartedChecker()); err != nil {
			return nil, fmt.Errorf("failed to add the webhook ready check: %w", err)
		}
	} else if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return nil, fmt.Errorf("failed to add the ready check: %w", err)
	}

	for _, m := range enabled {
		log := ctrl.LoggerFrom(ctx).WithValues("module", m.Name())
		log.Info("Setting up module")
		shared := modules.Shared{
			Manager: mgr,
			Options: modules.Options{
				WatchFilterValue: opts.WatchFilterValue,
				WatchNamespace:   opts.WatchNamespace,
				Concurrency:      concurrencyFor(opts.Concurrency, m.Name()),
				WebhooksEnabled:  webhooksEnabled,
			},
		}
		if err := m.SetupWithManager(ctrl.LoggerInto(ctx, log), shared); err != nil {
			return nil, fmt.Errorf("failed to set up module %q: %w", m.Name(), err)
		}
	}
	return &Manager{Manager: mgr, Modules: enabled}, nil
}

// WebhookServerProvider is implemented by a module that brings the manager's
// one webhook server: the runtimeext module's Runtime SDK server, which embeds
// controller-runtime's webhook server and so also serves every module's
// admission webhooks on the same port with the same certificate.
type WebhookServerProvider interface {
	NewWebhookServer(opts webhook.Options) (webhook.Server, error)
}

// newWebhookServer returns the webhook server of the enabled modules: the one
// an enabled WebhookServerProvider builds, else a plain one.
func newWebhookServer(enabled []modules.Module, opts webhook.Options) (webhook.Server, error) {
	var provider WebhookServerProvider
	var providerName string
	for _, m := range enabled {
		p, ok := m.(WebhookServerProvider)
		if !ok {
			continue
		}
		if provider != nil {
			return nil, fmt.Errorf("modules %q and %q both provide the webhook server", providerName, m.Name())
		}
		provider, providerName = p, m.Name()
	}
	if provider == nil {
		return webhook.NewServer(opts), nil
	}
	srv, err := provider.NewWebhookServer(opts)
	if err != nil {
		return nil, fmt.Errorf("failed to create the webhook server of module %q: %w", providerName, err)
	}
	return srv, nil
}

// DefaultLeaderElectionID derives the Lease name from the enabled modules, so
// that the Deployments of different provider types never share a lease.
func DefaultLeaderElectionID(enabled []modules.Module) string {
	names := make([]string, 0, len(enabled))
	for _, m := range enabled {
		names = append(names, m.Name())
	}
	return "capi-monolith-" + strings.Join(names, "-")
}

func concurrencyFor(c map[string]int, name string) int {
	if n, ok := c[name]; ok && n > 0 {
		return n
	}
	return DefaultConcurrency
}
