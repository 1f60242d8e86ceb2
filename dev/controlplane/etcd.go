package controlplane

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"net"
	"os"
	"path/filepath"
)

// EtcdEndpoint is how to reach the etcd Start runs: its client URL and the
// files of the one client certificate it accepts, kube-apiserver's.
//
// etcd serves TLS only and requires a client certificate signed by a CA of
// its own (--client-cert-auth, and --peer-client-cert-auth on its peer
// listener): on 127.0.0.1 every local user can connect, and etcd holds every
// Secret in the clear, workload clusters' CA keys included. A unix socket
// in the state folder would do too, but its path must fit the kernel's 108
// bytes, which a --data-dir or a test's temporary folder easily exceeds.
type EtcdEndpoint struct {
	// URL is etcd's client URL: https://127.0.0.1:<port>.
	URL string
	// CAFile is etcd's CA, which signed its serving certificate and the
	// client certificate in CertFile and KeyFile.
	CAFile, CertFile, KeyFile string
}

// TLSConfig is a client configuration that etcd accepts: its CA and the
// client certificate.
func (e EtcdEndpoint) TLSConfig() (*tls.Config, error) {
	caPEM, err := os.ReadFile(e.CAFile)
	if err != nil {
		return nil, fmt.Errorf("failed to read etcd's CA: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("failed to parse etcd's CA %s", e.CAFile)
	}
	cert, err := tls.LoadX509KeyPair(e.CertFile, e.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("failed to load etcd's client certificate: %w", err)
	}
	return &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// etcdFiles are etcd's own certificate and key (serving, and peer: a
// single member has no peer to call, so one certificate for both roles).
type etcdFiles struct {
	serverCert, serverKey string
}

// writeEtcdPKI makes etcd's CA, etcd's certificate and kube-apiserver's
// client certificate in dir, and returns where they are. The CA's key is
// never written: the certificates are made again at every start, and a key
// on disk could only sign more clients.
func writeEtcdPKI(dir, url string) (EtcdEndpoint, etcdFiles, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return EtcdEndpoint{}, etcdFiles{}, fmt.Errorf("failed to create etcd's cert folder: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return EtcdEndpoint{}, etcdFiles{}, fmt.Errorf("failed to make etcd's cert folder private: %w", err)
	}
	// A CA of etcd's own, not kube-apiserver's: a client certificate that
	// CA signs (the admin's) must not open etcd.
	ca, err := newAuthority("capi-monolith-dev-etcd-ca")
	if err != nil {
		return EtcdEndpoint{}, etcdFiles{}, err
	}
	serverCert, serverKey, err := ca.sign(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "etcd"},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return EtcdEndpoint{}, etcdFiles{}, err
	}
	clientCert, clientKey, err := ca.clientCert("kube-apiserver-etcd-client")
	if err != nil {
		return EtcdEndpoint{}, etcdFiles{}, err
	}
	ep := EtcdEndpoint{
		URL:      url,
		CAFile:   filepath.Join(dir, "ca.crt"),
		CertFile: filepath.Join(dir, "apiserver-etcd-client.crt"),
		KeyFile:  filepath.Join(dir, "apiserver-etcd-client.key"),
	}
	files := etcdFiles{serverCert: filepath.Join(dir, "server.crt"), serverKey: filepath.Join(dir, "server.key")}
	for path, data := range map[string][]byte{
		ep.CAFile: ca.pem, ep.CertFile: clientCert, ep.KeyFile: clientKey,
		files.serverCert: serverCert, files.serverKey: serverKey,
	} {
		if err := writePrivate(path, data); err != nil {
			return EtcdEndpoint{}, etcdFiles{}, err
		}
	}
	return ep, files, nil
}
