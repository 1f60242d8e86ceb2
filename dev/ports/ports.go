// Package ports finds free loopback ports: the project's one helper for it,
// used by dev (its webhook server, Cluster API core's listeners), tests and
// benchmarks.
package ports

import (
	"fmt"
	"net"
	"strconv"
	"sync"
)

// maxSkips bounds how many already-taken ports Free steps over in one call.
const maxSkips = 64

var (
	mu sync.Mutex
	// taken are the ports this process chose or reserved. The kernel knows
	// only the ports bound now: a port chosen for a child that has not bound
	// it yet, or named on the command line for a server not started yet,
	// looks free to it, so Free remembers them itself.
	taken = map[int]bool{}
)

// Free returns n distinct free loopback ports, none returned before by this
// process or reserved with Reserve. The listeners stay open until all are
// chosen so that the kernel never hands out one twice; the small window
// before a process binds them is accepted.
func Free(n int) ([]int, error) {
	mu.Lock()
	defer mu.Unlock()
	ports := make([]int, 0, n)
	for skips := 0; len(ports) < n; {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("failed to find a free port: %w", err)
		}
		// Held open until the end, so a skipped port is not offered again.
		defer l.Close()
		p := l.Addr().(*net.TCPAddr).Port
		if taken[p] {
			if skips++; skips > maxSkips {
				return nil, fmt.Errorf("failed to find a free port: %d ports offered were already taken by this process", skips)
			}
			continue
		}
		ports = append(ports, p)
	}
	for _, p := range ports {
		taken[p] = true
	}
	return ports, nil
}

// One returns one free loopback port (see Free).
func One() (int, error) {
	p, err := Free(1)
	if err != nil {
		return 0, err
	}
	return p[0], nil
}

// Reserve keeps Free from returning the ports of addresses this process will
// listen on itself (host:port, as its flags give them). Addresses that are
// off ("0", ""), or ask the kernel for a port (":0"), reserve nothing.
func Reserve(addresses ...string) error {
	mu.Lock()
	defer mu.Unlock()
	for _, a := range addresses {
		if a == "" || a == "0" {
			continue
		}
		_, port, err := net.SplitHostPort(a)
		if err != nil {
			return fmt.Errorf("invalid listen address %q: %w", a, err)
		}
		p, err := strconv.Atoi(port)
		if err != nil {
			return fmt.Errorf("invalid port in listen address %q: %w", a, err)
		}
		if p > 0 {
			taken[p] = true
		}
	}
	return nil
}
