package hosting

import (
	"fmt"
	"strconv"
	"strings"
)

// PortRange is an inclusive range of TCP ports.
type PortRange struct {
	First, Last int
}

// DefaultPortRange is where cluster listeners are opened unless configured:
// 4000 ports below Linux's default ephemeral range (32768-60999), so that
// outgoing connections never take them.
var DefaultPortRange = PortRange{First: 20000, Last: 23999}

// String formats the range as ParsePortRange reads it.
func (r PortRange) String() string { return fmt.Sprintf("%d-%d", r.First, r.Last) }

// Contains reports whether port is in the range.
func (r PortRange) Contains(port int) bool { return port >= r.First && port <= r.Last }

// Size is the number of ports in the range.
func (r PortRange) Size() int { return r.Last - r.First + 1 }

// ParsePortRange reads "FIRST-LAST" (or a single port).
func ParsePortRange(s string) (PortRange, error) {
	first, last, found := strings.Cut(strings.TrimSpace(s), "-")
	if !found {
		last = first
	}
	f, err := parsePort(first)
	if err != nil {
		return PortRange{}, fmt.Errorf("invalid port range %q: %w", s, err)
	}
	l, err := parsePort(last)
	if err != nil {
		return PortRange{}, fmt.Errorf("invalid port range %q: %w", s, err)
	}
	if l < f {
		return PortRange{}, fmt.Errorf("invalid port range %q: the last port is below the first", s)
	}
	return PortRange{First: f, Last: l}, nil
}

func parsePort(s string) (int, error) {
	p, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("%q is not a port number", s)
	}
	if p < 1 || p > 65535 {
		return 0, fmt.Errorf("port %d is outside 1-65535", p)
	}
	return p, nil
}
