package chaos

import (
	"context"
	"net/netip"
	"testing"

	. "github.com/onsi/gomega"
)

// The short run, part of make test: one cluster of the default and one of
// the ipam flavor, the manager SIGKILLed after each creation and after a
// scale-up, then the checks of the long runs (convergence, no duplicate
// address, nothing left after deletion, goroutines back to their baseline).
func TestShortManagerSIGKILLedWhileClustersAreCreatedAndDeleted(t *testing.T) {
	m := startManager(t)
	a := &chaosCluster{name: "short", template: "cluster-template.yaml", machines: 3}
	ipam := &chaosCluster{name: "short-ipam", template: "cluster-template-ipam.yaml", machines: 2, pool: netip.MustParsePrefix("10.128.40.0/24")}
	p := plan{
		clusters: []*chaosCluster{a, ipam},
		steps: []func(context.Context, Gomega){
			func(ctx context.Context, g Gomega) { scaleMachineDeployment(ctx, g, a.namespace, "short-md-0", 2) },
		},
		fault: m.kill(),
		m:     m,
	}
	fig := p.run(t)
	NewWithT(t).Expect(fig.faults).To(Equal(3))
	t.Logf("chaos figures (short, SIGKILL): %s", fig)
}
