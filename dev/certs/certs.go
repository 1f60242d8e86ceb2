// Package certs makes the throwaway certificate authority and serving
// certificate that the dev environment's webhook servers (Cluster API core's
// and ours) present to the apiserver over loopback.
package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
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
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("failed to generate the CA key: %w", err)
	}
	// Backdate by an hour so that a clock a little off never rejects them.
	notBefore := time.Now().Add(-time.Hour)
	notAfter := notBefore.Add(opts.Validity)
	caTemplate := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: opts.CommonName},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTemplate, caTemplate, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("failed to create the CA certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, fmt.Errorf("failed to parse the CA certificate: %w", err)
	}

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("failed to generate the serving key: %w", err)
	}
	template := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range opts.Hosts {
		if ip := net.ParseIP(h); ip != nil {
			template.IPAddresses = append(template.IPAddresses, ip)
		} else {
			template.DNSNames = append(template.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, template, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("failed to create the serving certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("failed to encode the serving key: %w", err)
	}
	return &Bundle{
		CAPEM:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}, nil
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
