//go:build chaos

package chaos

import (
	"context"
	"net/netip"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// The long runs (make test-chaos): the build tag keeps them out of make
// test, which runs the short one (short_test.go) on the same code.

func TestManagerSIGKILLedWhileClustersAreCreatedScaledAndDeleted(t *testing.T) {
	m := startManager(t)
	enableTopology(t, m)
	// The flavors of the e2e suite. The IPAM pools are disjoint, so an
	// address seen twice anywhere is a duplicate. machines and instances
	// are the counts after the last step.
	a := &chaosCluster{name: "a", template: "cluster-template.yaml", machines: 4}
	ipamA := &chaosCluster{name: "ipam-a", template: "cluster-template-ipam.yaml", machines: 2, pool: netip.MustParsePrefix("10.128.20.0/24")}
	pool := &chaosCluster{name: "pool", template: "cluster-template-machinepool.yaml", machines: 1, machinePool: "pool-mp-0", instances: 3,
		vars: map[string]string{"WORKER_MACHINE_COUNT": "2"}}
	b := &chaosCluster{name: "b", template: "cluster-template.yaml", machines: 4}
	ipamB := &chaosCluster{name: "ipam-b", template: "cluster-template-ipam.yaml", machines: 4, pool: netip.MustParsePrefix("10.128.21.0/24")}
	topo := &chaosCluster{name: "topo", topology: true, machines: 2, topologyPool: netip.MustParsePrefix("10.128.22.0/24")}
	p := plan{
		paused:   true,
		clusters: []*chaosCluster{a, ipamA, pool, b, ipamB, topo},
		steps: []func(context.Context, Gomega){
			func(ctx context.Context, g Gomega) { scaleMachineDeployment(ctx, g, a.namespace, "a-md-0", 3) },
			func(ctx context.Context, g Gomega) { scaleMachinePool(ctx, g, pool.namespace, pool.machinePool, 4) },
			func(ctx context.Context, g Gomega) { scaleMachineDeployment(ctx, g, ipamA.namespace, "ipam-a-md-0", 2) },
			func(ctx context.Context, g Gomega) { scaleMachineDeployment(ctx, g, b.namespace, "b-md-0", 3) },
			func(ctx context.Context, g Gomega) { scaleMachineDeployment(ctx, g, ipamB.namespace, "ipam-b-md-0", 3) },
			func(ctx context.Context, g Gomega) { scaleMachineDeployment(ctx, g, ipamA.namespace, "ipam-a-md-0", 1) },
			func(ctx context.Context, g Gomega) { scaleMachinePool(ctx, g, pool.namespace, pool.machinePool, 3) },
		},
		deletionFaults: 4,
		fault:          m.kill(),
		m:              m,
	}
	fig := p.run(t)
	NewWithT(t).Expect(fig.faults).To(BeNumerically(">=", 10))
	t.Logf("chaos figures (SIGKILL): %s", fig)
}

func TestKubeAPIServerRestartedWhileClustersAreCreatedScaledAndDeleted(t *testing.T) {
	m := startManager(t)
	// Every restart stops kube-apiserver (watches and requests in flight
	// of the manager and of core are cut) and starts it again on the same
	// etcd; it returns once the apiserver answers again.
	restart := &fault{name: "kube-apiserver restart", do: func() {
		start := time.Now()
		NewWithT(t).Expect(env.RestartAPIServer()).To(Succeed())
		t.Logf("kube-apiserver stopped and started again in %s", time.Since(start).Round(time.Millisecond))
	}}
	a := &chaosCluster{name: "r", template: "cluster-template.yaml", machines: 3}
	ipam := &chaosCluster{name: "r-ipam", template: "cluster-template-ipam.yaml", machines: 3, pool: netip.MustParsePrefix("10.128.30.0/24")}
	pool := &chaosCluster{name: "r-pool", template: "cluster-template-machinepool.yaml", machines: 1, machinePool: "r-pool-mp-0", instances: 2}
	p := plan{
		paused:   true,
		clusters: []*chaosCluster{a, ipam, pool},
		steps: []func(context.Context, Gomega){
			func(ctx context.Context, g Gomega) { scaleMachineDeployment(ctx, g, a.namespace, "r-md-0", 3) },
			func(ctx context.Context, g Gomega) { scaleMachineDeployment(ctx, g, ipam.namespace, "r-ipam-md-0", 2) },
			func(ctx context.Context, g Gomega) { scaleMachinePool(ctx, g, pool.namespace, pool.machinePool, 2) },
			func(ctx context.Context, g Gomega) { scaleMachineDeployment(ctx, g, a.namespace, "r-md-0", 2) },
		},
		deletionFaults: 2,
		fault:          restart,
		m:              m,
		// Every reconcile that fails while kube-apiserver is down adds to
		// that object's exponential backoff in controller-runtime (at most
		// 1000 s between tries), in Cluster API's managers as in ours:
		// after 7 restarts a cluster may wait that long for its next
		// reconcile, so the bound is past it. Seen once in four runs: KCP
		// wrote the kubeconfig of a cluster only after 5 minutes.
		converge: 17 * time.Minute,
	}
	fig := p.run(t)
	NewWithT(t).Expect(fig.faults).To(BeNumerically(">=", 5))
	t.Logf("chaos figures (kube-apiserver restarts): %s", fig)
}
