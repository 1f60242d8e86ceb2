package dev_test

import (
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

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
