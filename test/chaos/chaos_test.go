//go:build chaos

package chaos

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	kubeconfigutil "sigs.k8s.io/cluster-api/util/kubeconfig"

	infrav1 "github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	ipamv1alpha1 "github.com/capi-monolith/capi-monolith/ipam/api/v1alpha1"
	poolv1 "github.com/capi-monolith/capi-monolith/machinepool/api/v1alpha1"
)

// creationKills is how many times the manager is killed while clusters are
// created and scaled; deletionKills, while they are deleted.
const (
	creationKills = 12
	deletionKills = 4
)

// ourFinalizers are every finalizer the modules under test put on objects.
var ourFinalizers = []string{
	infrav1.ClusterFinalizer, infrav1.MachineFinalizer, infrav1.ClaimFinalizer,
	ipamv1alpha1.ProtectPoolFinalizer, ipamv1alpha1.ReleaseAddressFinalizer, ipamv1alpha1.ProtectAddressFinalizer,
	poolv1.PoolFinalizer, poolv1.InstanceFinalizer,
}

// chaosCluster is one cluster of the run and what it must converge to.
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
}

// figures are what the run prints at the end (and docs/reliability.md
// quotes).
type figures struct {
	clusters, killsSurvived, objectsChecked, addressesChecked, pausedObjects, leaks int
}

func TestManagerSIGKILLedWhileClustersAreCreatedScaledAndDeleted(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	var fig figures
	m := startManager(t)
	m.pending = func() int { return pendingWork(ctx) }

	// A paused cluster: provisioned first, then paused, and watched through
	// every kill. A restarted manager must write nothing of it.
	paused := &chaosCluster{name: "paused", template: "cluster-template.yaml", machines: 2}
	createCluster(ctx, t, paused)
	g.Eventually(func(g Gomega) {
		expectClusterProvisioned(ctx, g, paused.namespace, paused.name)
		expectMachinesProvisioned(ctx, g, paused.namespace, paused.name, paused.machines)
	}).WithTimeout(convergeTimeout).WithPolling(poll).Should(Succeed())
	patchCluster(ctx, g, paused.namespace, paused.name, func(c *clusterv1.Cluster) { c.Spec.Paused = new(true) })
	// Each controller records the pause once, in a Paused condition; from
	// then on nothing of the cluster may change.
	g.Eventually(func(g Gomega) {
		for _, gvk := range []schema.GroupVersionKind{monolithClusterGVK, monolithMachineGVK} {
			objs, err := list(ctx, gvk, paused.namespace)
			g.Expect(err).NotTo(HaveOccurred())
			for _, o := range objs {
				g.Expect(pausedCondition(o)).To(BeTrue(), "%s %s records the pause", gvk.Kind, o.GetName())
			}
		}
	}).WithTimeout(convergeTimeout).WithPolling(poll).Should(Succeed())
	pausedBefore := versions(ctx, g, paused.namespace)
	fig.pausedObjects = len(pausedBefore)

	// The clusters created, scaled and (later) deleted under kills, from
	// the flavors of the e2e suite. The IPAM pools are disjoint, so an
	// address seen twice anywhere is a duplicate.
	clusters := []*chaosCluster{
		{name: "a", template: "cluster-template.yaml", machines: 4},
		{name: "ipam-a", template: "cluster-template-ipam.yaml", machines: 2, pool: netip.MustParsePrefix("10.128.20.0/24")},
		{name: "pool", template: "cluster-template-machinepool.yaml", machines: 1, machinePool: "pool-mp-0", instances: 3,
			vars: map[string]string{"WORKER_MACHINE_COUNT": "2"}},
		{name: "b", template: "cluster-template.yaml", machines: 4},
		{name: "ipam-b", template: "cluster-template-ipam.yaml", machines: 4, pool: netip.MustParsePrefix("10.128.21.0/24")},
	}
	for _, c := range clusters {
		if c.pool.IsValid() {
			if c.vars == nil {
				c.vars = map[string]string{}
			}
			c.vars["MONOLITH_IPAM_ADDRESSES"] = c.pool.String()
		}
	}
	fig.clusters = len(clusters) + 1

	// Each step changes what the manager has to do (create a cluster,
	// scale up, scale down: machines and addresses made and released),
	// then the manager is killed at a random point of doing it and
	// restarted. clusters' machines and instances above are the counts
	// after the last step.
	steps := []func(){}
	for _, c := range clusters {
		steps = append(steps, func() { createCluster(ctx, t, c) })
	}
	steps = append(steps,
		func() { scaleMachineDeployment(ctx, g, clusters[0].namespace, "a-md-0", 3) },
		func() { scaleMachinePool(ctx, g, clusters[2].namespace, clusters[2].machinePool, 4) },
		func() { scaleMachineDeployment(ctx, g, clusters[1].namespace, "ipam-a-md-0", 2) },
		func() { scaleMachineDeployment(ctx, g, clusters[3].namespace, "b-md-0", 3) },
		func() { scaleMachineDeployment(ctx, g, clusters[4].namespace, "ipam-b-md-0", 3) },
		func() { scaleMachineDeployment(ctx, g, clusters[1].namespace, "ipam-a-md-0", 1) },
		func() { scaleMachinePool(ctx, g, clusters[2].namespace, clusters[2].machinePool, 3) },
	)
	g.Expect(steps).To(HaveLen(creationKills), "one kill after each step")
	for _, step := range steps {
		step()
		m.killAfterRandomDelay()
	}
	t.Logf("%d kills while creating and scaling %d clusters", m.kills, len(clusters))

	// Every cluster converges: Machines and instances provisioned with
	// provider IDs, claims bound, one address per machine.
	for _, c := range clusters {
		checked := 0
		g.Eventually(func(g Gomega) {
			checked = 1
			expectClusterProvisioned(ctx, g, c.namespace, c.name)
			checked += expectMachinesProvisioned(ctx, g, c.namespace, c.name, c.machines)
			if c.pool.IsValid() {
				checked += expectAddressesFromPool(ctx, g, c.namespace, c.pool)
			}
			if c.machinePool != "" {
				checked += expectPoolInstances(ctx, g, c.namespace, c.machinePool, c.instances)
			}
		}).WithTimeout(convergeTimeout).WithPolling(poll).Should(Succeed(), "cluster %s/%s converges", c.namespace, c.name)
		fig.objectsChecked += checked
	}
	fig.addressesChecked = expectNoDuplicateAddress(ctx, g)
	fig.objectsChecked += fig.addressesChecked

	// Not one write to the paused cluster's objects through all the kills.
	g.Expect(versions(ctx, g, paused.namespace)).To(Equal(pausedBefore), "objects of the paused cluster changed")
	fig.objectsChecked += fig.pausedObjects

	// Deletion, with kills: every cluster (the paused one unpaused first)
	// and then the template's pools.
	patchCluster(ctx, g, paused.namespace, paused.name, func(c *clusterv1.Cluster) { c.Spec.Paused = nil })
	all := append(clusters, paused)
	for _, c := range all {
		cluster := &clusterv1.Cluster{}
		cluster.Namespace, cluster.Name = c.namespace, c.name
		g.Expect(env.Client.Delete(ctx, cluster)).To(Succeed())
	}
	for range deletionKills {
		m.killAfterRandomDelay()
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
	for _, c := range clusters {
		if !c.pool.IsValid() {
			continue
		}
		pool := &unstructured.Unstructured{}
		pool.SetGroupVersionKind(monolithIPPoolGVK)
		pool.SetNamespace(c.namespace)
		pool.SetName(c.name + "-nodes")
		g.Expect(env.Client.Delete(ctx, pool)).To(Succeed())
	}

	// Nothing of ours is left: no IPAddress, claim, live allocation record,
	// MonolithMachine or pool, and none of our finalizers on what remains.
	var leaks []string
	g.Eventually(func(g Gomega) {
		leaks = leftovers(ctx, g, all)
		g.Expect(leaks).To(BeEmpty())
	}).WithTimeout(convergeTimeout).WithPolling(poll).Should(Succeed(), "nothing left after deletion")
	fig.leaks = len(leaks)
	fig.killsSurvived = m.kills

	g.Expect(fig.killsSurvived).To(BeNumerically(">=", 10))
	t.Logf("chaos figures: clusters=%d kills survived=%d (creation %d, deletion %d; %d with work in flight) objects checked=%d (IPAddresses %d, paused objects %d) duplicate addresses=0 leaks found=%d",
		fig.clusters, fig.killsSurvived, creationKills, deletionKills, m.inFlight, fig.objectsChecked, fig.addressesChecked, fig.pausedObjects, fig.leaks)
}

// createCluster makes a namespace for c, renders and applies its flavor,
// and for a machine pool writes the <cluster>-kubeconfig Secret a control
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
	apply(ctx, g, render(g, c.template, vars))
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
		secrets, err := list(ctx, secretGVK, c.namespace)
		g.Expect(err).NotTo(HaveOccurred())
		out = append(out, withOurFinalizers(secrets)...)
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
// a kill: MonolithMachines not provisioned or being deleted, and
// IPAddressClaims not bound or being deleted. A read error counts as
// nothing pending: the figure only reports.
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
