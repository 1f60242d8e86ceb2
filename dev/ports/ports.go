// Package ports finds free loopback ports: the project's one helper for it,
// used by dev (its webhook server, Cluster API core's listeners), tests and
// benchmarks.
package ports

import (
	"fmt"
	"net"
)

// Free returns n distinct free loopback ports. The listeners stay open until
// all are chosen so that the kernel never hands out one twice; the small
// window before a process binds them is accepted.
func Free(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("failed to find a free port: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
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
