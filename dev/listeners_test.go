package dev_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/gomega"
)

// listeners returns the local addresses of the TCP sockets pid listens on,
// from /proc: the socket inodes among its open files, looked up in its
// network namespace's tcp tables.
func listeners(g Gomega, pid int) []string {
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	g.Expect(err).NotTo(HaveOccurred())
	inodes := map[string]bool{}
	for _, fd := range fds {
		link, err := os.Readlink(filepath.Join(fmt.Sprintf("/proc/%d/fd", pid), fd.Name()))
		if err != nil {
			continue
		}
		if inode, ok := strings.CutPrefix(link, "socket:["); ok {
			inodes[strings.TrimSuffix(inode, "]")] = true
		}
	}
	var out []string
	for _, table := range []string{"tcp", "tcp6"} {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		g.Expect(err).NotTo(HaveOccurred())
		for _, line := range strings.Split(string(data), "\n")[1:] {
			fields := strings.Fields(line)
			// local_address st ... inode; st 0A is LISTEN.
			if len(fields) < 10 || fields[3] != "0A" || !inodes[fields[9]] {
				continue
			}
			out = append(out, decodeAddr(g, fields[1]))
		}
	}
	return out
}

// decodeAddr turns /proc/net/tcp's "0100007F:1F90" into "127.0.0.1:8080".
func decodeAddr(g Gomega, s string) string {
	hexIP, hexPort, _ := strings.Cut(s, ":")
	raw, err := hex.DecodeString(hexIP)
	g.Expect(err).NotTo(HaveOccurred())
	// Each 32-bit word is in host (little endian) order.
	for i := 0; i+4 <= len(raw); i += 4 {
		raw[i], raw[i+1], raw[i+2], raw[i+3] = raw[i+3], raw[i+2], raw[i+1], raw[i]
	}
	var port int
	_, err = fmt.Sscanf(hexPort, "%X", &port)
	g.Expect(err).NotTo(HaveOccurred())
	return net.JoinHostPort(net.IP(raw).String(), fmt.Sprint(port))
}

// expectLoopbackOnly checks that every listener of pid is on loopback.
func expectLoopbackOnly(g Gomega, pid int, name string) {
	addrs := listeners(g, pid)
	for _, addr := range addrs {
		host, _, err := net.SplitHostPort(addr)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(net.ParseIP(host).IsLoopback()).To(BeTrue(), "%s (pid %d) listens on %s; all: %v", name, pid, addr, addrs)
	}
}

// expectEtcdRefusesClientsWithoutACertificate checks every listener of dev's
// etcd (pid): plain HTTP gets no answer from etcd and TLS without a client
// certificate is refused, while the client listener answers
// kube-apiserver's certificate, from the state folder.
func expectEtcdRefusesClientsWithoutACertificate(g Gomega, pid int, stateDir string) {
	pki := filepath.Join(stateDir, "pki", "etcd")
	caPEM, err := os.ReadFile(filepath.Join(pki, "ca.crt"))
	g.Expect(err).NotTo(HaveOccurred())
	roots := x509.NewCertPool()
	g.Expect(roots.AppendCertsFromPEM(caPEM)).To(BeTrue())
	cert, err := tls.LoadX509KeyPair(filepath.Join(pki, "apiserver-etcd-client.crt"), filepath.Join(pki, "apiserver-etcd-client.key"))
	g.Expect(err).NotTo(HaveOccurred())
	client := func(cfg *tls.Config) *http.Client {
		return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
	}
	plain := client(nil)
	noCert := client(&tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12})
	withCert := client(&tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})

	addrs := listeners(g, pid)
	g.Expect(addrs).To(HaveLen(2), "etcd's client and peer listeners")
	answered := 0
	for _, addr := range addrs {
		if resp, err := plain.Get("http://" + addr + "/version"); err == nil {
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			g.Expect(resp.StatusCode).To(Equal(http.StatusBadRequest), "etcd at %s answers plain HTTP: %s", addr, body)
		}
		_, err := noCert.Get("https://" + addr + "/version")
		g.Expect(err).To(MatchError(ContainSubstring("certificate required")), "etcd at %s serves TLS without a client certificate", addr)
		resp, err := withCert.Get("https://" + addr + "/health")
		g.Expect(err).NotTo(HaveOccurred(), "etcd at %s refuses kube-apiserver's certificate", addr)
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			answered++
		}
	}
	g.Expect(answered).To(Equal(1), "the client listener answers kube-apiserver's certificate")
}
