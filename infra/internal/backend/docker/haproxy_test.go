package docker

import (
	"net/netip"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

func TestRenderHAProxyConfig(t *testing.T) {
	cp1 := HAProxyServer{Name: "ns-c-cp1", Address: netip.MustParseAddr("172.18.0.3")}
	cp2 := HAProxyServer{Name: "ns-c-cp2", Address: netip.MustParseAddr("172.18.0.4")}
	v6 := HAProxyServer{Name: "ns-c-cp6", Address: netip.MustParseAddr("fc00::3")}

	tests := []struct {
		name        string
		servers     []HAProxyServer
		contains    []string
		notContains []string
		servers6443 int
	}{
		{
			name:        "a cluster without control plane nodes gets a frontend and an empty backend",
			servers:     nil,
			contains:    []string{"frontend control-plane\n  bind *:6443\n", "default_backend kube-apiservers", "backend kube-apiservers\n  option httpchk GET /healthz\n"},
			notContains: []string{"  server ", "bind :::"},
		},
		{
			name:    "every control plane node is a health-checked server on port 6443",
			servers: []HAProxyServer{cp1, cp2},
			contains: []string{
				"  server ns-c-cp1 172.18.0.3:6443 check check-ssl verify none\n",
				"  server ns-c-cp2 172.18.0.4:6443 check check-ssl verify none\n",
			},
			servers6443: 2,
		},
		{
			name:        "an IPv6 node is bracketed and the frontend also binds IPv6",
			servers:     []HAProxyServer{v6},
			contains:    []string{"  server ns-c-cp6 [fc00::3]:6443 check", "  bind :::6443 v6only\n"},
			servers6443: 1,
		},
		{
			name:        "a node without an address is left out",
			servers:     []HAProxyServer{cp1, {Name: "ns-c-pending"}},
			notContains: []string{"ns-c-pending"},
			servers6443: 1,
		},
		{
			name:        "two servers with one name are rendered once",
			servers:     []HAProxyServer{cp1, {Name: cp1.Name, Address: netip.MustParseAddr("172.18.0.9")}},
			servers6443: 1,
		},
		{
			name:        "characters haproxy refuses in a server name are replaced",
			servers:     []HAProxyServer{{Name: "ns/c cp", Address: cp1.Address}},
			contains:    []string{"  server ns_c_cp 172.18.0.3:6443"},
			servers6443: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got := RenderHAProxyConfig(tt.servers)
			for _, s := range tt.contains {
				g.Expect(got).To(ContainSubstring(s))
			}
			for _, s := range tt.notContains {
				g.Expect(got).NotTo(ContainSubstring(s))
			}
			g.Expect(strings.Count(got, "  server ")).To(Equal(tt.servers6443))
		})
	}
}

func TestRenderHAProxyConfigDoesNotDependOnTheOrderOfServers(t *testing.T) {
	g := NewWithT(t)
	a := HAProxyServer{Name: "a", Address: netip.MustParseAddr("10.0.0.1")}
	b := HAProxyServer{Name: "b", Address: netip.MustParseAddr("10.0.0.2")}
	g.Expect(RenderHAProxyConfig([]HAProxyServer{a, b})).To(Equal(RenderHAProxyConfig([]HAProxyServer{b, a})))
}
