// Package certs makes throwaway certificate authorities and the certificates
// they sign: the CA and serving certificate that the dev environment's webhook
// servers (Cluster API core's and ours) present to the apiserver over
// loopback (New, Bundle), and the CAs, serving and client certificates of the
// tests and benchmarks (NewCA, CA, Pair). It is the project's one certificate
// helper.
package certs

import (
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// File names in the folder Write fills: the ones controller-runtime's webhook
// server reads from its cert dir by default, and the CA beside them.
const (
	CAFile   = "ca.crt"
	CertFile = "tls.crt"
	KeyFile  = "tls.key"
)

// DefaultValidity is how long the certificates are valid when
// Options.Validity is zero. They are made again at every start.
const DefaultValidity = 7 * 24 * time.Hour

// Options configures New.
type Options struct {
	// CommonName of the CA. Default: "capi-monolith-dev-ca".
	CommonName string
	// Validity of both certificates. Default: DefaultValidity.
	Validity time.Duration
	// Hosts are more IP addresses or DNS names the serving certificate is
	// for, besides loopback (e.g. dev's --webhook-host).
	Hosts []string
}

// Bundle is a CA and a serving certificate it signed for 127.0.0.1, ::1 and
// localhost, PEM encoded.
type Bundle struct {
	CAPEM   []byte
	CertPEM []byte
	KeyPEM  []byte
}

// New makes a new CA and a serving certificate for the loopback addresses.
func New(opts Options) (*Bundle, error) {
	if opts.CommonName == "" {
		opts.CommonName = "capi-monolith-dev-ca"
	}
	if opts.Validity == 0 {
		opts.Validity = DefaultValidity
	}
	ca, err := newCA(opts.CommonName, opts.Validity)
	if err != nil {
		return nil, err
	}
	pair, err := ca.Serving(opts.Hosts...)
	if err != nil {
		return nil, err
	}
	return &Bundle{CAPEM: ca.PEM, CertPEM: pair.CertPEM, KeyPEM: pair.KeyPEM}, nil
}

// Write stores the bundle in dir as CAFile, CertFile and KeyFile, readable by
// the owner only.
func (b *Bundle) Write(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("failed to create the cert folder: %w", err)
	}
	for name, data := range map[string][]byte{CAFile: b.CAPEM, CertFile: b.CertPEM, KeyFile: b.KeyPEM} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return fmt.Errorf("failed to write %s: %w", name, err)
		}
	}
	return nil
}

// CertPool returns a pool holding the bundle's CA, for clients checking the
// serving certificate.
func (b *Bundle) CertPool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(b.CAPEM)
	return pool
}
