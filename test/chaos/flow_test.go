package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	kubeconfigutil "sigs.k8s.io/cluster-api/util/kubeconfig"

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
	// cluster-template-topology.yaml with the ClusterClass beside it): it
	// converges when its MonolithCluster is provisioned, the runtime
	// extension patched its machine templates with topologyPool and
	// BeforeClusterCreate was called. Its Machines are not checked: no
	// kubeadm provider runs to give them bootstrap data.
	topology     bool
	topologyPool netip.Prefix
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
// reconcile, a status patch, a cache sync), then deals it. The delay picks
// the point; nothing waits on it for a result.
func (f *fault) afterRandomDelay(ctx context.Context) {
	delay := 300*time.Millisecond + rand.N(2200*time.Millisecond)
	select {
	case <-time.After(delay):
	case <-ctx.Done():
		return
	}
	if pendingWork(ctx) > 0 {
		f.inFlight++
	}
	f.do()
	f.n++
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
}

func (f figures) String() string {
	return fmt.Sprintf("clusters=%d faults survived=%d (%d with work in flight) objects checked=%d (IPAddresses %d, paused objects %d) manager writes audited=%d (to the paused cluster 0) duplicate addresses=0 leaks found=%d goroutines baseline=%d after=%d",
		f.clusters, f.faults, f.inFlight, f.objectsChecked, f.addressesChecked, f.pausedObjects, f.auditedWrites, f.leaks, f.goroutinesBaseline, f.goroutinesAfter)
}

// run creates, scales and deletes p's clusters with a fault after each
// step, and checks what the suite guarantees: every cluster converges, no
// address is handed out twice, the paused cluster is not written to,
// nothing of ours is left after deletion, and the manager's goroutines
// come back to their baseline.
func (p plan) run(t *testing.T) figures {
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	var fig figures
	// The goroutines of a manager that has started and has nothing to do.
	fig.goroutinesBaseline = p.m.steadyGoroutines(ctx, g)

	// A paused cluster: provisioned first, then paused, and watched through
	// every fault. A restarted manager must write nothing of it.
	var paused *chaosCluster
	var pausedBefore map[string]string
	var auditFrom int64
	if p.paused {
		paused = &chaosCluster{name: "paused", template: "cluster-template.yaml", machines: 2}
		createCluster(ctx, t, paused)
		g.Eventually(func(g Gomega) {
			expectClusterProvisioned(ctx, g, paused.namespace, paused.name)
			expectMachinesProvisioned(ctx, g, paused.namespace, paused.name, paused.machines)
		}).WithTimeout(convergeTimeout).WithPolling(poll).Should(Succeed())
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
		}).WithTimeout(convergeTimeout).WithPolling(poll).Should(Succeed())
		pausedBefore = versions(ctx, g, paused.namespace)
		fig.pausedObjects = len(pausedBefore)
		var err error
		auditFrom, err = auditOffset()
		g.Expect(err).NotTo(HaveOccurred())
	}

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
		p.fault.afterRandomDelay(ctx)
	}
	for _, step := range p.steps {
		step(ctx, g)
		p.fault.afterRandomDelay(ctx)
	}
	t.Logf("%d faults (%s) while creating and scaling %d clusters", p.fault.n, p.fault.name, len(p.clusters))

	// Every cluster converges: Machines and instances provisioned with
	// provider IDs, claims bound, one address per machine.
	for _, c := range p.clusters {
		checked := 0
		g.Eventually(func(g Gomega) {
			checked = 1
			expectClusterProvisioned(ctx, g, c.namespace, c.name)
			if c.topology {
				checked += expectTopologyPatched(ctx, g, c)
				return
			}
			checked += expectMachinesProvisioned(ctx, g, c.namespace, c.name, c.machines)
			if c.pool.IsValid() {
				checked += expectAddressesFromPool(ctx, g, c.namespace, c.pool)
			}
			if c.machinePool != "" {
				checked += expectPoolInstances(ctx, g, c.namespace, c.machinePool, c.instances)
			}
			if c.docker != nil {
				checked += c.docker(ctx, g)
			}
		}).WithTimeout(convergeTimeout).WithPolling(poll).Should(Succeed(), "cluster %s/%s converges", c.namespace, c.name)
		fig.objectsChecked += checked
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
		p.fault.afterRandomDelay(ctx)
	}
	for _, c := range all {
		g.Eventually(func(g Gomega) {
			g.Expect(coreAlive()).To(Succeed())
			for _, gvk := range clusterKinds {
				objs, err := list(ctx, gvk, c.namespace)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(names(objs)).To(BeEmpty(), "%s left in %s", gvk.Kind, c.namespace)
			}
		}).WithTimeout(convergeTimeout).WithPolling(poll).Should(Succeed(), "cluster %s/%s deleted", c.namespace, c.name)
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
	}).WithTimeout(convergeTimeout).WithPolling(poll).Should(Succeed(), "nothing left after deletion")
	fig.leaks = len(leaks)
	fig.faults, fig.inFlight = p.fault.n, p.fault.inFlight

	// With every cluster gone the manager is back to what it runs with
	// nothing to do: a goroutine per cluster, machine, watch or request
	// that outlives its object shows here.
	fig.goroutinesAfter = expectGoroutinesBackToBaseline(ctx, g, p.m, fig.goroutinesBaseline)
	return fig
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

// createCluster makes a namespace for c, renders its flavor, applies it
// without its kubeadm objects (see flavortest.WithoutKubeadm), and for a
// machine pool writes the <cluster>-kubeconfig Secret a control
// plane provider would: core's MachinePool controller reads the workload
// cluster's Nodes before it makes Machines, and with no workload cluster
// here the management apiserver plays it.
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
	// Only Cluster API core runs here, no kubeadm provider: the flavors'
	// kubeadm objects are swapped for test-only ones (package flavortest),
	// so that the faults hit our provider's flows as before.
	objs, err := flavortest.WithoutKubeadm(render(g, c.template, vars))
	g.Expect(err).NotTo(HaveOccurred())
	apply(ctx, g, objs)
	if c.machinePool == "" {
		return
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	g.Expect(env.WriteKubeconfig(path)).To(Succeed())
	kubeconfig, err := os.ReadFile(path)
	g.Expect(err).NotTo(HaveOccurred())
	cluster := &clusterv1.Cluster{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: c.namespace, Name: c.name}, cluster)).To(Succeed())
	g.Expect(env.Client.Create(ctx, kubeconfigutil.GenerateSecret(cluster, kubeconfig))).To(Succeed())
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
// a fault: MonolithMachines not provisioned or being deleted, and
// IPAddressClaims not bound or being deleted (the topology flavor's
// MonolithMachines, which never get bootstrap data here, excepted). A read error counts as
// nothing pending: the figure only reports.
func pendingWork(ctx context.Context) int {
	n := 0
	machines, err := list(ctx, monolithMachineGVK, "")
	if err != nil {
		return 0
	}
	for _, o := range machines {
		if _, ok := o.GetLabels()[clusterv1.ClusterTopologyMachineDeploymentNameLabel]; ok {
			// Waits for bootstrap data no provider here gives.
			continue
		}
		provisioned, _, _ := unstructured.NestedBool(o.Object, "status", "initialization", "provisioned")
		if !provisioned || o.GetDeletionTimestamp() != nil {
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
