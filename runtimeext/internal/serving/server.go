package serving

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	runtimecatalog "sigs.k8s.io/cluster-api/api/runtime/catalog"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
	"sigs.k8s.io/cluster-api/exp/runtime/server"
)

const (
	// DefaultMaxBodyBytes caps a hook request body. A GeneratePatches request
	// for a large topology (every template of every machine deployment) stays
	// far below it.
	DefaultMaxBodyBytes = 8 << 20
	// DefaultTimeout bounds a call that names no ?timeout=; 30 s is the
	// largest timeoutSeconds Cluster API accepts from discovery.
	DefaultTimeout = 30 * time.Second
	// MaxTimeout is the largest ?timeout= a hook call may ask for (the
	// largest timeoutSeconds Cluster API accepts); larger ones answer 400.
	MaxTimeout = 30 * time.Second
)

// Options configure New. Zero values mean the documented defaults.
type Options struct {
	// Webhook are the settings of the webhook server every module shares
	// (port, certificate folder and names, TLS options).
	Webhook webhook.Options

	// ClientCAFile, when set, turns on mTLS for the hook paths: clients
	// must present a certificate signed by this CA. Admission webhook paths
	// are not affected (the apiserver presents no client certificate unless
	// configured to).
	ClientCAFile string

	// MaxBodyBytes caps a hook request body; larger ones answer 413.
	// Default: DefaultMaxBodyBytes.
	MaxBodyBytes int64

	// DefaultTimeout bounds a call without ?timeout=. Default: DefaultTimeout.
	DefaultTimeout time.Duration
}

// Catalog returns a catalog of every hook of Cluster API's v1alpha1 hooks
// group, the one this extension implements.
func Catalog() (*runtimecatalog.Catalog, error) {
	c := runtimecatalog.New()
	if err := runtimehooksv1.AddToCatalog(c); err != nil {
		return nil, fmt.Errorf("failed to build the Runtime SDK catalog: %w", err)
	}
	return c, nil
}

// New returns the runtime webhook server, guarded as the package comment
// says. Use it as ctrl.Options.WebhookServer; admission webhooks registered on
// it are served on the same port with the same certificate.
func New(opts Options) (*server.Server, error) {
	cat, err := Catalog()
	if err != nil {
		return nil, err
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.DefaultTimeout <= 0 {
		opts.DefaultTimeout = DefaultTimeout
	}
	tlsOpts := slices.Clone(opts.Webhook.TLSOpts)
	var requireClientCert bool
	if opts.ClientCAFile != "" {
		pool, err := readCAFile(opts.ClientCAFile)
		if err != nil {
			return nil, err
		}
		requireClientCert = true
		// Verified when given at the TLS layer; required on hook paths only,
		// by the guard, so that admission webhooks keep working.
		tlsOpts = append(tlsOpts, func(c *tls.Config) {
			c.ClientCAs = pool
			c.ClientAuth = tls.VerifyClientCertIfGiven
		})
	}
	srv, err := server.New(server.Options{
		Catalog:  cat,
		Host:     opts.Webhook.Host,
		Port:     opts.Webhook.Port,
		CertDir:  opts.Webhook.CertDir,
		CertName: opts.Webhook.CertName,
		KeyName:  opts.Webhook.KeyName,
		TLSOpts:  tlsOpts,
	})
	if err != nil {
		return nil, fmt.Errorf("failed to create the runtime extension server: %w", err)
	}
	srv.Server = &guard{
		Server:            srv.Server,
		catalog:           cat,
		maxBodyBytes:      opts.MaxBodyBytes,
		defaultTimeout:    opts.DefaultTimeout,
		requireClientCert: requireClientCert,
	}
	return srv, nil
}

func readCAFile(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("failed to read the client CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("failed to read the client CA file %s: no PEM certificate in it", path)
	}
	return pool, nil
}

// FromManager returns the manager's webhook server when it is a runtime
// server (the runtimeext module is enabled and webhooks are on).
func FromManager(mgr ctrl.Manager) (*server.Server, bool) {
	srv, ok := mgr.GetWebhookServer().(*server.Server)
	return srv, ok
}

// AddHandlers validates every handler (names are DNS-1123 labels, unique;
// timeout and failure policy explicit) and adds them to srv. It must run
// before the server starts.
func AddHandlers(srv *server.Server, handlers []server.ExtensionHandler) error {
	var errs []error
	seen := map[string]bool{}
	for _, h := range handlers {
		name := runtimecatalog.HookName(h.Hook)
		if msgs := validation.IsDNS1123Label(h.Name); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("handler %q of hook %s: name is not a DNS-1123 label: %v", h.Name, name, msgs))
			continue
		}
		if seen[h.Name] {
			errs = append(errs, fmt.Errorf("handler %q of hook %s: name used twice", h.Name, name))
			continue
		}
		seen[h.Name] = true
		if h.TimeoutSeconds == nil || *h.TimeoutSeconds < 1 || *h.TimeoutSeconds > 30 {
			errs = append(errs, fmt.Errorf("handler %q of hook %s: timeoutSeconds must be set, between 1 and 30", h.Name, name))
			continue
		}
		if h.FailurePolicy == nil {
			errs = append(errs, fmt.Errorf("handler %q of hook %s: failurePolicy must be set", h.Name, name))
			continue
		}
		if err := srv.AddExtensionHandler(h); err != nil {
			errs = append(errs, fmt.Errorf("failed to add handler %q of hook %s: %w", h.Name, name, err))
		}
	}
	return errors.Join(errs...)
}
