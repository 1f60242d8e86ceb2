package chaos

import (
	"context"
	"net/netip"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
)

// expectClusterProvisioned checks that the Cluster's MonolithCluster (its
// infrastructureRef: the template's, or one the topology controller made)
// is provisioned with a control plane endpoint, and that core saw it.
func expectClusterProvisioned(ctx context.Context, g Gomega, namespace, name string) {
	g.Expect(coreAlive()).To(Succeed())
	ref := &clusterv1.Cluster{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, ref)).To(Succeed())
	g.Expect(ref.Spec.InfrastructureRef.Name).NotTo(BeEmpty(), "Cluster %s/%s infrastructureRef", namespace, name)
	infra, err := get(ctx, monolithClusterGVK, namespace, ref.Spec.InfrastructureRef.Name)
	g.Expect(err).NotTo(HaveOccurred())
	provisioned, _, _ := unstructured.NestedBool(infra.Object, "status", "initialization", "provisioned")
	g.Expect(provisioned).To(BeTrue(), "MonolithCluster %s/%s provisioned", namespace, name)
	host, _, _ := unstructured.NestedString(infra.Object, "spec", "controlPlaneEndpoint", "host")
	g.Expect(host).NotTo(BeEmpty(), "MonolithCluster %s/%s control plane endpoint", namespace, name)

	cluster := &clusterv1.Cluster{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, cluster)).To(Succeed())
	g.Expect(cluster.Status.Initialization.InfrastructureProvisioned).To(HaveValue(BeTrue()), "Cluster %s/%s infrastructure provisioned", namespace, name)
	g.Expect(cluster.Spec.ControlPlaneEndpoint.Host).To(Equal(host))
}

// expectMachinesProvisioned checks that the cluster has exactly n Machines
// outside machine pools, each with a providerID, provisioned, and backed by
// a provisioned MonolithMachine with the same providerID. It returns the
// number of objects it checked.
func expectMachinesProvisioned(ctx context.Context, g Gomega, namespace, cluster string, n int) int {
	machines := &clusterv1.MachineList{}
	g.Expect(env.Client.List(ctx, machines, client.InNamespace(namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: cluster})).To(Succeed())
	var own []clusterv1.Machine
	for _, m := range machines.Items {
		if _, inPool := m.Labels[clusterv1.MachinePoolNameLabel]; !inPool {
			own = append(own, m)
		}
	}
	g.Expect(own).To(HaveLen(n), "Machines of %s/%s", namespace, cluster)
	checked := 0
	for _, m := range own {
		g.Expect(m.Spec.ProviderID).NotTo(BeEmpty(), "Machine %s providerID", m.Name)
		g.Expect(m.Status.Initialization.InfrastructureProvisioned).To(HaveValue(BeTrue()), "Machine %s infrastructure", m.Name)
		g.Expect(m.Status.Phase).To(Equal(string(clusterv1.MachinePhaseProvisioned)), "Machine %s phase", m.Name)
		infra, err := get(ctx, monolithMachineGVK, namespace, m.Spec.InfrastructureRef.Name)
		g.Expect(err).NotTo(HaveOccurred())
		ok, _, _ := unstructured.NestedBool(infra.Object, "status", "initialization", "provisioned")
		g.Expect(ok).To(BeTrue(), "MonolithMachine %s provisioned", infra.GetName())
		id, _, _ := unstructured.NestedString(infra.Object, "spec", "providerID")
		g.Expect(id).To(Equal(m.Spec.ProviderID), "MonolithMachine %s providerID", infra.GetName())
		checked += 2
	}
	return checked
}

// expectAddressesFromPool checks that every MonolithMachine of the
// namespace has exactly one address of the pool, that every
// IPAddressClaim is bound to an IPAddress that exists and names it, and
// that no address of the namespace is handed out twice. It returns the
// number of objects it checked.
func expectAddressesFromPool(ctx context.Context, g Gomega, namespace string, pool netip.Prefix) int {
	checked := 0
	machines, err := list(ctx, monolithMachineGVK, namespace)
	g.Expect(err).NotTo(HaveOccurred())
	seen := map[netip.Addr]string{}
	for _, m := range machines {
		addrs, _, _ := unstructured.NestedSlice(m.Object, "status", "addresses")
		var inPool []netip.Addr
		for _, a := range addrs {
			s, _ := a.(map[string]any)["address"].(string)
			if ip, err := netip.ParseAddr(s); err == nil && pool.Contains(ip) {
				inPool = append(inPool, ip)
			}
		}
		g.Expect(inPool).To(HaveLen(1), "MonolithMachine %s addresses %v", m.GetName(), addrs)
		g.Expect(seen).NotTo(HaveKey(inPool[0]), "address %s of MonolithMachine %s handed out twice", inPool[0], m.GetName())
		seen[inPool[0]] = m.GetName()
		checked++
	}

	claims := &ipamv1.IPAddressClaimList{}
	g.Expect(env.Client.List(ctx, claims, client.InNamespace(namespace))).To(Succeed())
	g.Expect(claims.Items).To(HaveLen(len(machines)), "one IPAddressClaim per MonolithMachine")
	for _, c := range claims.Items {
		g.Expect(c.Status.AddressRef.Name).NotTo(BeEmpty(), "claim %s bound", c.Name)
		a := &ipamv1.IPAddress{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: c.Status.AddressRef.Name}, a)).To(Succeed(), "claim %s's IPAddress", c.Name)
		g.Expect(a.Spec.ClaimRef.Name).To(Equal(c.Name), "IPAddress %s names its claim", a.Name)
		checked += 2
	}
	addresses := &ipamv1.IPAddressList{}
	g.Expect(env.Client.List(ctx, addresses, client.InNamespace(namespace))).To(Succeed())
	g.Expect(addresses.Items).To(HaveLen(len(claims.Items)), "one IPAddress per claim, no stray one")
	return checked
}

// expectPoolInstances checks that the machine pool has n instances: n
// provider IDs in the MonolithMachinePool, one MonolithMachine per
// instance, and one core Machine per MonolithMachine. It returns the
// number of objects it checked.
func expectPoolInstances(ctx context.Context, g Gomega, namespace, pool string, n int) int {
	infra, err := get(ctx, monolithMachinePoolGVK, namespace, pool)
	g.Expect(err).NotTo(HaveOccurred())
	ids, _, _ := unstructured.NestedStringSlice(infra.Object, "spec", "providerIDList")
	g.Expect(ids).To(HaveLen(n), "MonolithMachinePool %s providerIDList", pool)
	replicas, _, _ := unstructured.NestedInt64(infra.Object, "status", "replicas")
	g.Expect(replicas).To(BeEquivalentTo(n), "MonolithMachinePool %s status.replicas", pool)

	instances, err := list(ctx, monolithMachineGVK, namespace, client.MatchingLabels{clusterv1.MachinePoolNameLabel: pool})
	g.Expect(err).NotTo(HaveOccurred())
	var instanceIDs, instanceNames []string
	for _, m := range instances {
		id, _, _ := unstructured.NestedString(m.Object, "spec", "providerID")
		instanceIDs = append(instanceIDs, id)
		instanceNames = append(instanceNames, m.GetName())
	}
	g.Expect(instanceIDs).To(ConsistOf(ids), "one MonolithMachine per instance")

	machines := &clusterv1.MachineList{}
	g.Expect(env.Client.List(ctx, machines, client.InNamespace(namespace), client.MatchingLabels{clusterv1.MachinePoolNameLabel: pool})).To(Succeed())
	var machineInfra []string
	for _, m := range machines.Items {
		if m.DeletionTimestamp.IsZero() {
			machineInfra = append(machineInfra, m.Spec.InfrastructureRef.Name)
		}
	}
	g.Expect(machineInfra).To(ConsistOf(instanceNames), "one Machine per instance")
	return 1 + len(instances) + len(machineInfra)
}

// expectNoDuplicateAddress checks every IPAddress of the apiserver: no
// address appears twice. The suite's pools are disjoint, so this holds
// across pools too. It returns how many it checked.
func expectNoDuplicateAddress(ctx context.Context, g Gomega) int {
	addresses := &ipamv1.IPAddressList{}
	g.Expect(env.Client.List(ctx, addresses)).To(Succeed())
	seen := map[string]string{}
	for _, a := range addresses.Items {
		holder := a.Namespace + "/" + a.Name
		g.Expect(seen).NotTo(HaveKey(a.Spec.Address), "address %s held by %s and %s", a.Spec.Address, seen[a.Spec.Address], holder)
		seen[a.Spec.Address] = holder
	}
	return len(addresses.Items)
}
