package manager

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/cluster-api/util/flags"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// DefaultConcurrency is the number of objects each controller of a module
// reconciles at once unless --<module>-concurrency says otherwise.
const DefaultConcurrency = 10

// Options are the settings of the shared manager. The zero value is not
// useful; start from what BindFlags sets as defaults.
type Options struct {
	// EnableModules are the names of the modules to run, as given to
	// --enable-modules. The binary resolves them into modules with its
	// registry; New runs the modules it is handed and does not read this.
	EnableModules []string

	// WatchNamespace restricts the cache to one namespace; empty means all.
	WatchNamespace string
	// WatchFilterValue is the value of the cluster.x-k8s.io/watch-filter
	// label objects must carry to be reconciled; empty means all.
	WatchFilterValue string
	// SyncPeriod is the minimum interval at which every watched object is
	// reconciled again.
	SyncPeriod time.Duration

	// LeaderElect turns leader election on.
	LeaderElect bool
	// LeaderElectionID is the name of the Lease. Empty means one derived from
	// the enabled modules, so that Deployments running different modules
	// never share a lease.
	LeaderElectionID string
	// LeaderElectionNamespace is where the Lease lives; empty means the
	// namespace the manager runs in.
	LeaderElectionNamespace string
	LeaseDuration           time.Duration
	RenewDeadline           time.Duration
	RetryPeriod             time.Duration

	// HealthAddr is where /healthz and /readyz are served; "0" disables it.
	HealthAddr string

	// WebhookHost is the address the webhook server binds to; empty means
	// every interface, as in-cluster providers have it (the Service reaches
	// the Pod's IP). `capi-monolith dev` sets 127.0.0.1.
	WebhookHost string
	// WebhookPort is the port of the webhook server; 0 disables webhooks.
	WebhookPort     int
	WebhookCertDir  string
	WebhookCertName string
	WebhookKeyName  string

	// KubeAPIQPS and KubeAPIBurst limit the manager's client.
	KubeAPIQPS   float32
	KubeAPIBurst int

	// Concurrency is per module name; a missing entry means DefaultConcurrency.
	Concurrency map[string]int

	// Diagnostics are Cluster API's manager options: the diagnostics
	// (metrics, pprof) endpoint, its authn/authz, and TLS settings.
	Diagnostics flags.ManagerOptions

	// SkipControllerNameValidation lets one process build several managers
	// with the same controllers, which controller-runtime otherwise refuses.
	// Only tests that restart the manager in-process set it.
	SkipControllerNameValidation bool
}

// DefaultOptions returns the options the flags default to, for a binary
// that knows the modules named moduleNames (the --enable-modules default).
func DefaultOptions(moduleNames ...string) Options {
	var opts Options
	BindFlags(pflag.NewFlagSet("defaults", pflag.ContinueOnError), &opts, moduleNames)
	return opts
}

// BindFlags binds opts to fs, with their defaults, using the flag names
// Cluster API providers use. moduleNames are the modules the binary knows:
// --enable-modules defaults to all of them, and each gets a
// --<module>-concurrency flag. Modules bind their own options themselves.
func BindFlags(fs *pflag.FlagSet, opts *Options, moduleNames []string) {
	fs.StringSliceVar(&opts.EnableModules, "enable-modules", moduleNames,
		fmt.Sprintf("Comma-separated list of modules to run. Valid modules: %v.", moduleNames))

	fs.StringVar(&opts.WatchNamespace, "namespace", "",
		"Namespace that the controllers watch to reconcile objects. If unspecified, they watch all namespaces.")
	fs.StringVar(&opts.WatchFilterValue, "watch-filter", "",
		fmt.Sprintf("Label value that objects must carry to be reconciled. Label key is always %s. If unspecified, all objects are reconciled.", clusterv1.WatchLabel))
	fs.DurationVar(&opts.SyncPeriod, "sync-period", 10*time.Minute,
		"The minimum interval at which watched resources are reconciled (e.g. 15m).")

	fs.BoolVar(&opts.LeaderElect, "leader-elect", false,
		"Enable leader election, so that only one replica reconciles at a time.")
	fs.StringVar(&opts.LeaderElectionID, "leader-elect-id", "",
		"Name of the leader election Lease. Defaults to one derived from --enable-modules.")
	fs.StringVar(&opts.LeaderElectionNamespace, "leader-elect-namespace", "",
		"Namespace of the leader election Lease. Defaults to the namespace the manager runs in.")
	fs.DurationVar(&opts.LeaseDuration, "leader-elect-lease-duration", 15*time.Second,
		"Interval at which non-leader candidates wait to force acquire leadership.")
	fs.DurationVar(&opts.RenewDeadline, "leader-elect-renew-deadline", 10*time.Second,
		"Duration the leader retries refreshing leadership before giving up.")
	fs.DurationVar(&opts.RetryPeriod, "leader-elect-retry-period", 2*time.Second,
		"Duration the leader election clients wait between tries.")

	fs.StringVar(&opts.HealthAddr, "health-addr", ":9440",
		"The address the health endpoint (/healthz, /readyz) binds to; 0 disables it.")

	fs.StringVar(&opts.WebhookHost, "webhook-host", "",
		"Address the webhook server binds to (an IP or a host name); empty: every interface.")
	fs.IntVar(&opts.WebhookPort, "webhook-port", 9443,
		"Webhook server port; 0 disables the webhook server (controllers then re-validate their input).")
	fs.StringVar(&opts.WebhookCertDir, "webhook-cert-dir", "/tmp/k8s-webhook-server/serving-certs/",
		"Folder holding the webhook server's certificate and key.")
	fs.StringVar(&opts.WebhookCertName, "webhook-cert-name", "tls.crt",
		"File name of the webhook server's certificate in --webhook-cert-dir.")
	fs.StringVar(&opts.WebhookKeyName, "webhook-key-name", "tls.key",
		"File name of the webhook server's key in --webhook-cert-dir.")

	fs.Float32Var(&opts.KubeAPIQPS, "kube-api-qps", 100,
		"Maximum queries per second from the manager's client to the Kubernetes API server.")
	fs.IntVar(&opts.KubeAPIBurst, "kube-api-burst", 200,
		"Maximum burst of queries from the manager's client to the Kubernetes API server.")

	if opts.Concurrency == nil {
		opts.Concurrency = map[string]int{}
	}
	for _, name := range moduleNames {
		opts.Concurrency[name] = DefaultConcurrency
		fs.Var(concurrencyValue{name: name, into: opts.Concurrency}, name+"-concurrency",
			fmt.Sprintf("Number of objects each controller of the %s module reconciles at once.", name))
	}

	flags.AddManagerOptions(fs, &opts.Diagnostics)
}

// concurrencyValue is a pflag.Value writing one module's entry of the
// concurrency map, so that modules need no flag variables of their own.
type concurrencyValue struct {
	name string
	into map[string]int
}

func (v concurrencyValue) String() string { return fmt.Sprint(v.into[v.name]) }
func (v concurrencyValue) Type() string   { return "int" }
func (v concurrencyValue) Set(s string) error {
	var n int
	if _, err := fmt.Sscan(s, &n); err != nil {
		return fmt.Errorf("not a whole number: %q", s)
	}
	if n < 1 {
		return fmt.Errorf("must be at least 1, got %d", n)
	}
	v.into[v.name] = n
	return nil
}

// Validate reports every flag value that cannot work, before anything starts.
func (o *Options) Validate() error {
	var errs []error
	if o.SyncPeriod <= 0 {
		errs = append(errs, fmt.Errorf("--sync-period must be positive, got %s", o.SyncPeriod))
	}
	if o.WebhookPort < 0 || o.WebhookPort > 65535 {
		errs = append(errs, fmt.Errorf("--webhook-port must be between 0 and 65535, got %d", o.WebhookPort))
	}
	if h := o.WebhookHost; h != "" && net.ParseIP(h) == nil && len(validation.IsDNS1123Subdomain(h)) > 0 {
		errs = append(errs, fmt.Errorf("--webhook-host must be an IP address or a host name, got %q", h))
	}
	if o.KubeAPIQPS <= 0 || o.KubeAPIBurst <= 0 {
		errs = append(errs, fmt.Errorf("--kube-api-qps and --kube-api-burst must be positive, got %v and %d", o.KubeAPIQPS, o.KubeAPIBurst))
	}
	if o.LeaderElect && !(o.LeaseDuration > o.RenewDeadline && o.RenewDeadline > o.RetryPeriod && o.RetryPeriod > 0) {
		errs = append(errs, fmt.Errorf("leader election needs --leader-elect-lease-duration (%s) > --leader-elect-renew-deadline (%s) > --leader-elect-retry-period (%s) > 0",
			o.LeaseDuration, o.RenewDeadline, o.RetryPeriod))
	}
	return errors.Join(errs...)
}
