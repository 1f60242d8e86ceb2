package etcd

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net"
	"time"
)

// ServingCertificateValidity is how long a member's serving certificate is
// valid (a Server mints a new one when its member's address changes).
const ServingCertificateValidity = 365 * 24 * time.Hour

// servingCertificate is the certificate of the member the connection is
// for, as kubeadm's etcd/server certificate: common name the node's name,
// names localhost and the node, addresses the member's IP and loopback,
// signed by the etcd CA.
func (s *Server) servingCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	addr, ok := hello.Conn.LocalAddr().(memberAddr)
	if !ok {
		return nil, errors.New("the connection was not made by Dial")
	}
	v, err := readView(s.opts.Store)
	if err != nil {
		return nil, err
	}
	m, ok := v.byPod[addr.pod]
	if !ok {
		return nil, fmt.Errorf("failed to serve etcd in Pod kube-system/%s: %w", addr.pod, ErrNoMember)
	}
	key := m.pod + "/" + m.ip
	s.certsMu.Lock()
	defer s.certsMu.Unlock()
	if c, ok := s.certs[key]; ok && s.opts.Now().Before(c.notAfter) {
		return c.cert, nil
	}
	c, err := s.signServing(m)
	if err != nil {
		return nil, err
	}
	s.certs[key] = c
	return c.cert, nil
}

// servingCert is a member's serving certificate and when it expires. It
// holds no parsed Leaf: a server with one certificate never reads it, and
// a parse held for the cluster's lifetime costs about 2.5 KB of heap.
type servingCert struct {
	cert     *tls.Certificate
	notAfter time.Time
}

func (s *Server) signServing(m *member) (*servingCert, error) {
	caKey, ok := s.ca.PrivateKey.(crypto.Signer)
	if !ok {
		return nil, errors.New("the etcd CA's private key cannot sign")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("failed to generate a serving key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, fmt.Errorf("failed to generate a serial number: %w", err)
	}
	now := s.opts.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: m.name},
		NotBefore:    now.Add(-5 * time.Minute),
		NotAfter:     now.Add(ServingCertificateValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		// kubeadm's etcd server certificate serves and is a client of its peers.
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:    []string{"localhost", m.name},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	if ip := net.ParseIP(m.ip); ip != nil {
		tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, s.ca.Leaf, key.Public(), caKey)
	if err != nil {
		return nil, fmt.Errorf("failed to sign the serving certificate of etcd member %s: %w", m.name, err)
	}
	return &servingCert{
		cert:     &tls.Certificate{Certificate: [][]byte{der, s.ca.Certificate[0]}, PrivateKey: key},
		notAfter: tmpl.NotAfter,
	}, nil
}
