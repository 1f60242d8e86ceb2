package apiserver

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"log"
	"math/big"
	"net"
	"net/http"
	"time"
)

// ClusterTLS is what one cluster's listener presents and trusts.
type ClusterTLS struct {
	// Certificate is the serving certificate (with its key).
	Certificate tls.Certificate
	// ClientCAs signed the client certificates to accept: the cluster's
	// <cluster>-ca, which signs the client certificate of Cluster API's
	// <cluster>-kubeconfig.
	ClientCAs *x509.CertPool
}

// TLSConfig returns a server configuration that requires a client
// certificate and verifies it against the ClientCAs of the cluster that
// forClient picks for the connection (by the server name the client sent,
// or the listener the caller built the configuration for). A client
// without a certificate, or with one another CA signed, fails the
// handshake.
func TLSConfig(forClient func(*tls.ClientHelloInfo) (*ClusterTLS, error)) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		// http.Server sets up HTTP/2 only when the outer configuration
		// offers it.
		NextProtos: []string{"h2", "http/1.1"},
		GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			c, err := forClient(hello)
			if err != nil {
				return nil, fmt.Errorf("failed to find the cluster of server name %q: %w", hello.ServerName, err)
			}
			return &tls.Config{
				MinVersion:   tls.VersionTLS12,
				Certificates: []tls.Certificate{c.Certificate},
				ClientAuth:   tls.RequireAndVerifyClientCert,
				ClientCAs:    c.ClientCAs,
				NextProtos:   []string{"h2", "http/1.1"},
			}, nil
		},
	}
}

// Serve serves handler over TLS on l with cfg until ctx ends, then shuts
// the server down (open watches are cut).
func Serve(ctx context.Context, l net.Listener, handler http.Handler, cfg *tls.Config) error {
	srv := &http.Server{
		Handler:           handler,
		TLSConfig:         cfg,
		ReadHeaderTimeout: 30 * time.Second,
		// Failed handshakes (clients without a valid certificate) are
		// expected here and not worth the standard logger's noise.
		ErrorLog:    log.New(discard{}, "", 0),
		BaseContext: func(net.Listener) context.Context { return ctx },
	}
	// Closed when ctx ends, without a goroutine waiting for it.
	stop := context.AfterFunc(ctx, func() { _ = srv.Close() })
	defer stop()
	err := srv.Serve(tls.NewListener(l, cfg))
	// A listener closed after ctx ended (the cluster no longer served) may
	// reach Serve before the server's Close does: not a failure either.
	if errors.Is(err, http.ErrServerClosed) || (ctx.Err() != nil && errors.Is(err, net.ErrClosed)) {
		return nil
	}
	return fmt.Errorf("failed to serve the workload API: %w", err)
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// ServingCertificateValidity is how long NewServingCertificate's
// certificates are valid.
const ServingCertificateValidity = 365 * 24 * time.Hour

// NewServingCertificate makes a serving certificate for hosts (IP
// addresses or DNS names) signed by the CA (the cluster's <cluster>-ca key
// pair), as kubeadm signs kube-apiserver's.
func NewServingCertificate(ca tls.Certificate, hosts []string, now time.Time) (tls.Certificate, error) {
	caCert := ca.Leaf
	if caCert == nil {
		var err error
		if caCert, err = x509.ParseCertificate(ca.Certificate[0]); err != nil {
			return tls.Certificate{}, fmt.Errorf("failed to parse the CA certificate: %w", err)
		}
	}
	caKey, ok := ca.PrivateKey.(crypto.Signer)
	if !ok {
		return tls.Certificate{}, errors.New("the CA's private key cannot sign")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("failed to generate the serving key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("failed to generate a serial number: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:    now.Add(-5 * time.Minute),
		NotAfter:     now.Add(ServingCertificateValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, key.Public(), caKey)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("failed to sign the serving certificate: %w", err)
	}
	// No parsed Leaf: a server with one certificate never reads it, and a
	// parse held for the cluster's lifetime costs about 2.5 KB of heap.
	return tls.Certificate{Certificate: [][]byte{der, ca.Certificate[0]}, PrivateKey: key}, nil
}

// NewClusterTLS makes a cluster's listener material from its CA as Cluster
// API stores it (the tls.crt and tls.key of the <cluster>-ca Secret): a
// serving certificate for hosts signed by the CA, and the CA as the only
// signer of accepted client certificates.
func NewClusterTLS(caCertPEM, caKeyPEM []byte, hosts []string, now time.Time) (*ClusterTLS, error) {
	ca, err := tls.X509KeyPair(caCertPEM, caKeyPEM)
	if err != nil {
		return nil, fmt.Errorf("failed to read the cluster CA: %w", err)
	}
	serving, err := NewServingCertificate(ca, hosts, now)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Leaf)
	return &ClusterTLS{Certificate: serving, ClientCAs: pool}, nil
}
