package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	ipamv1alpha1 "github.com/capi-monolith/capi-monolith/ipam/api/v1alpha1"
	poolv1 "github.com/capi-monolith/capi-monolith/machinepool/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/test/flavortest"
)

// ourFinalizers are every finalizer the modules under test put on objects.
var ourFinalizers = []string{
	infrav1.ClusterFinalizer, infrav1.MachineFinalizer, infrav1.ClaimFinalizer,
	ipamv1alpha1.ProtectPoolFinalizer, ipamv1alpha1.ReleaseAddressFinalizer, ipamv1alpha1.ProtectAddressFinalizer,
	poolv1.PoolFinalizer, poolv1.InstanceFinalizer,
}

// chaosCluster is one cluster of a run and what it must converge to.
type chaosCluster struct {
	name, template string
	vars           map[string]string
	namespace      string
	// machines is the number of Machines outside machine pools once every
	// scale step is done.
	machines int
	// pool, when valid, is the MonolithIPPool range every machine takes
	// one address from.
	pool netip.Prefix
	// machinePool, when set, is the MachinePool and instances its number
	// of instances once every scale step is done.
	machinePool string
	instances   int
	// topology marks a cluster of the topology flavor (template is then
	// cluster-template-topology.yaml with the ClusterClass beside it): on
	// top of what every cluster converges to, the runtime extension
	// patched its machine templates with topologyPool (every machine takes
	// an address of it) and BeforeClusterCreate was called.
	topology     bool
	topologyPool netip.Prefix
	// withoutKubeadm applies the flavor without its kubeadm objects (see
	// flavortest.WithoutKubeadm): for the docker flavor, whose backend
	// executes bootstrap data, and the test node image has no kubeadm.
	// Its Machines then converge to Provisioned, with no Node, no control
	// plane and no workload API.
	withoutKubeadm bool
	// docker, when set, checks the cluster's containers as part of its
	// convergence and returns how many it checked.
	docker func(ctx context.Context, g Gomega) int
}

// fault is one kind of disruption of a run (a manager SIGKILL, a
// kube-apiserver restart), counted.
type fault struct {
	name string
	do   func()
	// n counts the faults dealt; inFlight, those dealt while work was
	// pending (pendingWork reported some): the evidence that they hit the
	// flows mid-way, not between them.
	n, inFlight int
}

// afterRandomDelay lets the flows run for a random 0.3–2.5 s, so that the
// fault lands at a random point of whatever the manager is doing (a
// reconcile, a status patch, a cache sync), then records the clusters'
// endpoints (see endpoints) and deals it. The delay picks the point;
// nothing waits on it for a result.
func (f *fault) afterRandomDelay(ctx context.Context, endpoints endpoints) {
	delay := 300*time.Millisecond + rand.N(2200*time.Millisecond)
	select {
	case <-time.After(delay):
	case <-ctx.Done():
		return
	}
	if pendingWork(ctx) > 0 {
		f.inFlight++
	}
	endpoints.record(ctx)
	f.do()
	f.n++
}

// endpoints are the control plane endpoints (host:port) of the
// MonolithClusters, by namespace/name, as they were when the first fault
// after their provisioning was dealt: the workload API listener of each
// must come back on it after every fault.
type endpoints map[string]string

// record adds the endpoint of every MonolithCluster that has one and was
// not recorded yet. A read error records nothing: a later fault records
// it, and the check compares only what was recorded.
func (e endpoints) record(ctx context.Context) {
	clusters, err := list(ctx, monolithClusterGVK, "")
	if err != nil {
		return
	}
	for _, c := range clusters {
		key := c.GetNamespace() + "/" + c.GetName()
		if _, ok := e[key]; ok {
			continue
		}
		if endpoint := endpointString(c); endpoint != "" {
			e[key] = endpoint
		}
	}
}

// of is the endpoint recorded for the Cluster's MonolithCluster, empty if
// none was.
func (e endpoints) of(ctx context.Context, g Gomega, namespace, name string) string {
	cluster := &clusterv1.Cluster{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, cluster)).To(Succeed())
	return e[namespace+"/"+cluster.Spec.InfrastructureRef.Name]
}

// plan is one chaos run.
type plan struct {
	// paused adds a provisioned and then paused cluster of the default
	// flavor, watched through every fault: nothing of it may be written.
	paused bool
	// clusters are created one step each, then steps (scales) run; a
	// fault follows every creation and every step.
	clusters []*chaosCluster
	steps    []func(ctx context.Context, g Gomega)
	// deletionFaults are dealt after every cluster was deleted.
	deletionFaults int
	fault          *fault
	m              *manager
	// converge bounds each wait for convergence; default convergeTimeout.
	converge time.Duration
}

// figures are what a run prints at the end (and docs/reliability.md
// quotes).
type figures struct {
	clusters, faults, inFlight, objectsChecked, addressesChecked, pausedObjects, leaks int
	// goroutinesBaseline is the manager's goroutine count after start-up,
	// before any cluster; goroutinesAfter, once every cluster is deleted.
	goroutinesBaseline, goroutinesAfter int
	// auditedWrites is how many write requests of the manager the audit
	// log holds while the paused cluster was watched.
	auditedWrites int
	// listeners is how many workload API listeners were found serving on
	// the endpoint recorded before the faults (see endpoints).
	listeners int
}

func (f figures) String() string {
	return fmt.Sprintf("clusters=%d faults survived=%d (%d with work in flight) objects checked=%d (IPAddresses %d, paused objects %d) workload listeners back on their recorded endpoint=%d manager writes audited=%d (to the paused cluster 0) duplicate addresses=0 leaks found=%d goroutines baseline=%d after=%d",
		f.clusters, f.faults, f.inFlight, f.objectsChecked, f.addressesChecked, f.pausedObjects, f.listeners, f.auditedWrites, f.leaks, f.goroutinesBaseline, f.goroutinesAfter)
}

// run creates, scales and deletes p's clusters with a fault after each
// step, and checks what the suite guarantees: every cluster converges, no
// address is handed out twice, the paused cluster is not written to,
// nothing of ours is left after deletion, and the manager's goroutines
// come back to their baseline.
func (p plan) run(t *testing.T) figures {
	if p.converge == 0 {
		p.converge = convergeTimeout
	}
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	var fig figures
	recorded := endpoints{}
	// Each phase's duration is logged, to see where a run spends its time.
	since := time.Now()
	took := func(phase string) {
		t.Logf("%s took %s", phase, time.Since(since).Round(100*time.Millisecond))
		since = time.Now()
	}
	// The goroutines of a manager that has started and has nothing to do.
	fig.goroutinesBaseline = p.m.steadyGoroutines(ctx, g)
	took("the goroutine baseline")

	// A paused cluster: provisioned first, then paused, and watched through
	// every fault. A restarted manager must write nothing of it.
	var paused *chaosCluster
	var pausedBefore map[string]string
	var auditFrom int64
	if p.paused {
		paused = &chaosCluster{name: "paused", template: "cluster-template.yaml", machines: 2}
		createCluster(ctx, t, paused)
		g.Eventually(func(g Gomega) { expectConverged(ctx, g, paused, "") }).
			WithTimeout(p.converge).WithPolling(poll).Should(Succeed(), "cluster %s/%s converges before it is paused", paused.namespace, paused.name)
		patchCluster(ctx, g, paused.namespace, paused.name, func(c *clusterv1.Cluster) { c.Spec.Paused = new(true) })
		// Each controller records the pause once, in a Paused condition;
		// from then on nothing of the cluster may change.
		g.Eventually(func(g Gomega) {
			for _, gvk := range []schema.GroupVersionKind{monolithClusterGVK, monolithMachineGVK} {
				objs, err := list(ctx, gvk, paused.namespace)
				g.Expect(err).NotTo(HaveOccurred())
				for _, o := range objs {
					g.Expect(pausedCondition(o)).To(BeTrue(), "%s %s records the pause", gvk.Kind, o.GetName())
				}
			}
		}).WithTimeout(p.converge).WithPolling(poll).Should(Succeed())
		pausedBefore = versions(ctx, g, paused.namespace)
		fig.pausedObjects = len(pausedBefore)
		var err error
		auditFrom, err = auditOffset()
		g.Expect(err).NotTo(HaveOccurred())
		took("the paused cluster")
	}

	// A failed run leaves its clusters behind (nothing but a running
	// manager could finalize them): paused, they are left alone by the
	// managers of the runs after it (no workload API served for them, no
	// reconciles), which would otherwise count against those runs'
	// goroutine baselines.
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, c := range append(slices.Clone(p.clusters), paused) {
			if c == nil || c.namespace == "" {
				continue
			}
			cluster := &clusterv1.Cluster{}
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: c.namespace, Name: c.name}, cluster); err != nil {
				continue
			}
			base := cluster.DeepCopy()
			cluster.Spec.Paused = new(true)
			if err := env.Client.Patch(ctx, cluster, client.MergeFrom(base)); err != nil {
				t.Logf("pausing the cluster %s/%s a failed run leaves: %v", c.namespace, c.name, err)
			}
		}
	})

	for _, c := range p.clusters {
		if c.pool.IsValid() {
			if c.vars == nil {
				c.vars = map[string]string{}
			}
			c.vars["MONOLITH_IPAM_ADDRESSES"] = c.pool.String()
		}
	}
	fig.clusters = len(p.clusters)
	if paused != nil {
		fig.clusters++
	}

	// Each step changes what the manager has to do (create a cluster,
	// scale up, scale down: machines and addresses made and released),
	// then the fault is dealt at a random point of doing it.
	for _, c := range p.clusters {
		createCluster(ctx, t, c)
		p.fault.afterRandomDelay(ctx, recorded)
	}
	for _, step := range p.steps {
		step(ctx, g)
		p.fault.afterRandomDelay(ctx, recorded)
	}
	t.Logf("%d faults (%s) while creating and scaling %d clusters", p.fault.n, p.fault.name, len(p.clusters))
	took("creating and scaling")

	// Every cluster converges: its control plane Available, Machines Running
	// with their Nodes and instances provisioned, claims bound, one address
	// per machine, its workload API back on its recorded endpoint.
	for _, c := range p.clusters {
		checked := 0
		g.Eventually(func(g Gomega) {
			checked = expectConverged(ctx, g, c, recorded.of(ctx, g, c.namespace, c.name))
		}).WithTimeout(p.converge).WithPolling(poll).Should(Succeed(), "cluster %s/%s converges", c.namespace, c.name)
		took("the convergence of " + c.name)
		fig.objectsChecked += checked
		if !c.withoutKubeadm && recorded.of(ctx, g, c.namespace, c.name) != "" {
			fig.listeners++
		}
	}
	fig.addressesChecked = expectNoDuplicateAddress(ctx, g)
	fig.objectsChecked += fig.addressesChecked

	all := slices.Clone(p.clusters)
	if paused != nil {
		// Not one write to the paused cluster's objects through all the
		// faults.
		g.Expect(versions(ctx, g, paused.namespace)).To(Equal(pausedBefore), "objects of the paused cluster changed")
		fig.objectsChecked += fig.pausedObjects
		// Nor one write request of the manager for an object of the
		// paused cluster's namespace, successful or not, in the
		// apiserver's audit log.
		writes, total, err := managerWrites(auditFrom, paused.namespace)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(total).To(BeNumerically(">", 0), "the audit log records the manager's writes")
		g.Expect(writes).To(BeEmpty(), "the manager wrote to the paused cluster's namespace")
		fig.auditedWrites = total
		patchCluster(ctx, g, paused.namespace, paused.name, func(c *clusterv1.Cluster) { c.Spec.Paused = nil })
		// Unpaused, it is reconciled again: a manager started while it was
		// paused serves its workload API again, on the endpoint it had.
		g.Eventually(func(g Gomega) {
			fig.objectsChecked += expectConverged(ctx, g, paused, recorded.of(ctx, g, paused.namespace, paused.name))
		}).WithTimeout(p.converge).WithPolling(poll).Should(Succeed(), "cluster %s/%s converges once unpaused", paused.namespace, paused.name)
		fig.listeners++
		all = append(all, paused)
	}

	// Deletion, with faults: every cluster (the paused one unpaused first)
	// and then the pools.
	for _, c := range all {
		cluster := &clusterv1.Cluster{}
		cluster.Namespace, cluster.Name = c.namespace, c.name
		g.Expect(env.Client.Delete(ctx, cluster)).To(Succeed())
	}
	for range p.deletionFaults {
		p.fault.afterRandomDelay(ctx, recorded)
	}
	for _, c := range all {
		g.Eventually(func(g Gomega) {
			g.Expect(capiAlive()).To(Succeed())
			for _, gvk := range clusterKinds {
				objs, err := list(ctx, gvk, c.namespace)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(names(objs)).To(BeEmpty(), "%s left in %s", gvk.Kind, c.namespace)
			}
		}).WithTimeout(p.converge).WithPolling(poll).Should(Succeed(), "cluster %s/%s deleted", c.namespace, c.name)
		took("the deletion of " + c.name)
	}
	for _, c := range p.clusters {
		for _, name := range c.poolNames() {
			pool := &unstructured.Unstructured{}
			pool.SetGroupVersionKind(monolithIPPoolGVK)
			pool.SetNamespace(c.namespace)
			pool.SetName(name)
			g.Expect(env.Client.Delete(ctx, pool)).To(Succeed())
		}
	}

	// Nothing of ours is left: no IPAddress, claim, live allocation record,
	// MonolithMachine or pool, and none of our finalizers on what remains.
	var leaks []string
	g.Eventually(func(g Gomega) {
		leaks = leftovers(ctx, g, all)
		g.Expect(leaks).To(BeEmpty())
	}).WithTimeout(p.converge).WithPolling(poll).Should(Succeed(), "nothing left after deletion")
	fig.leaks = len(leaks)
	took("the leak check")
	fig.faults, fig.inFlight = p.fault.n, p.fault.inFlight

	// With every cluster gone the manager is back to what it runs with
	// nothing to do: a goroutine per cluster, machine, watch or request
	// that outlives its object shows here.
	fig.goroutinesAfter = expectGoroutinesBackToBaseline(ctx, g, p.m, fig.goroutinesBaseline)
	took("the goroutines' return to the baseline")
	return fig
}

// expectConverged checks everything c converges to (see run) and returns
// the number of objects it checked. endpoint, when not empty, is where the
// cluster's workload API must answer.
func expectConverged(ctx context.Context, g Gomega, c *chaosCluster, endpoint string) int {
	checked := 1
	expectClusterProvisioned(ctx, g, c.namespace, c.name)
	if c.withoutKubeadm {
		checked += expectMachines(ctx, g, c.namespace, c.name, c.machines, clusterv1.MachinePhaseProvisioned)
	} else {
		checked += expectMachines(ctx, g, c.namespace, c.name, c.machines, clusterv1.MachinePhaseRunning)
		checked += expectControlPlaneAvailable(ctx, g, c.namespace, c.name)
	}
	if c.pool.IsValid() {
		checked += expectAddressesFromPool(ctx, g, c.namespace, c.pool)
	}
	if c.topology {
		checked += expectTopologyPatched(ctx, g, c)
		checked += expectAddressesFromPool(ctx, g, c.namespace, c.topologyPool)
	}
	if c.machinePool != "" {
		checked += expectPoolInstances(ctx, g, c.namespace, c.machinePool, c.instances)
	}
	if !c.withoutKubeadm {
		checked += expectWorkloadAPI(ctx, g, c.namespace, c.name, endpoint)
	}
	if c.docker != nil {
		checked += c.docker(ctx, g)
	}
	return checked
}

// poolNames are the MonolithIPPools the cluster's flavor made, deleted
// after the cluster.
func (c *chaosCluster) poolNames() []string {
	switch {
	case c.topology:
		return []string{topologyPoolName}
	case c.pool.IsValid():
		return []string{c.name + "-nodes"}
	}
	return nil
}

// createCluster makes a namespace for c, renders its flavor and applies it
// as a user does (`clusterctl generate cluster | kubectl apply -f -`); the
// kubeadm providers run beside core. A withoutKubeadm cluster gets its
// flavor without the kubeadm objects (flavortest.WithoutKubeadm).
func createCluster(ctx context.Context, t *testing.T, c *chaosCluster) {
	t.Helper()
	g := NewWithT(t)
	c.namespace = env.Namespace(t, "chaos-"+c.name)
	vars := templateVars(c.namespace, c.name)
	for k, v := range c.vars {
		vars[k] = v
	}
	if c.topology {
		createTopologyCluster(ctx, g, c, vars)
		return
	}
	objs := render(g, c.template, vars)
	if c.withoutKubeadm {
		var err error
		objs, err = flavortest.WithoutKubeadm(objs)
		g.Expect(err).NotTo(HaveOccurred())
	}
	apply(ctx, g, objs)
}

// versions maps kind/name to resourceVersion for the paused cluster's
// MonolithCluster and MonolithMachines: any write changes it.
func versions(ctx context.Context, g Gomega, namespace string) map[string]string {
	out := map[string]string{}
	for _, gvk := range []schema.GroupVersionKind{monolithClusterGVK, monolithMachineGVK} {
		objs, err := list(ctx, gvk, namespace)
		g.Expect(err).NotTo(HaveOccurred())
		for _, o := range objs {
			out[gvk.Kind+"/"+o.GetName()] = o.GetResourceVersion()
		}
	}
	g.Expect(out).NotTo(BeEmpty())
	return out
}

// leftovers lists what is left of ours after every cluster and pool was
// deleted: any object of a cluster kind or a MonolithIPPool in the
// clusters' namespaces, any allocation record not released, and any object
// still carrying one of our finalizers (Secrets included).
func leftovers(ctx context.Context, g Gomega, clusters []*chaosCluster) []string {
	var out []string
	namespaces := map[string]bool{}
	for _, c := range clusters {
		namespaces[c.namespace] = true
		for _, gvk := range append(slices.Clone(clusterKinds), monolithIPPoolGVK) {
			objs, err := list(ctx, gvk, c.namespace)
			g.Expect(err).NotTo(HaveOccurred())
			for _, o := range objs {
				out = append(out, fmt.Sprintf("%s %s/%s", gvk.Kind, o.GetNamespace(), o.GetName()))
			}
		}
		for _, gvk := range []schema.GroupVersionKind{secretGVK, monolithMachineTemplateGVK, monolithClusterTemplateGVK} {
			objs, err := list(ctx, gvk, c.namespace)
			g.Expect(err).NotTo(HaveOccurred())
			out = append(out, withOurFinalizers(objs)...)
		}
	}
	records := &ipamv1alpha1.MonolithIPAllocationList{}
	g.Expect(env.Client.List(ctx, records)).To(Succeed())
	for _, r := range records.Items {
		if namespaces[r.Spec.PoolRef.Namespace] && !r.IsReleased() {
			out = append(out, fmt.Sprintf("MonolithIPAllocation %s (live, %s of %s/%s)", r.Name, r.Spec.Address, r.Spec.PoolRef.Namespace, r.Spec.PoolRef.Name))
		}
		for _, f := range r.Finalizers {
			if slices.Contains(ourFinalizers, f) {
				out = append(out, fmt.Sprintf("MonolithIPAllocation %s has finalizer %s", r.Name, f))
			}
		}
	}
	return out
}

// pendingWork counts what the manager has yet to finish, read just before
// a fault: MonolithMachines not provisioned or being deleted, kubeadm
// Machines not Running with their Node (the workload API's part), and
// IPAddressClaims not
// bound or being deleted. A read error counts as nothing pending: the
// figure only reports.
func pendingWork(ctx context.Context) int {
	n := 0
	machines, err := list(ctx, monolithMachineGVK, "")
	if err != nil {
		return 0
	}
	for _, o := range machines {
		provisioned, _, _ := unstructured.NestedBool(o.Object, "status", "initialization", "provisioned")
		if !provisioned || o.GetDeletionTimestamp() != nil {
			n++
		}
	}
	nodeless := &clusterv1.MachineList{}
	if err := env.Client.List(ctx, nodeless); err != nil {
		return n
	}
	for _, m := range nodeless.Items {
		// A Machine without kubeadm bootstrap (the docker flavor's) never
		// gets a Node here.
		if m.Spec.Bootstrap.ConfigRef.IsDefined() && m.Status.Phase != string(clusterv1.MachinePhaseRunning) {
			n++
		}
	}
	claims, err := list(ctx, ipAddressClaimGVK, "")
	if err != nil {
		return n
	}
	for _, o := range claims {
		bound, _, _ := unstructured.NestedString(o.Object, "status", "addressRef", "name")
		if bound == "" || o.GetDeletionTimestamp() != nil {
			n++
		}
	}
	return n
}

func withOurFinalizers(objs []unstructured.Unstructured) []string {
	var out []string
	for _, o := range objs {
		for _, f := range o.GetFinalizers() {
			if slices.Contains(ourFinalizers, f) {
				out = append(out, fmt.Sprintf("%s %s/%s has finalizer %s", o.GetKind(), o.GetNamespace(), o.GetName(), f))
			}
		}
	}
	return out
}

func names(objs []unstructured.Unstructured) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.GetName())
	}
	return out
}
