package chaos

import (
	"context"
	"net"
	"net/netip"
	"strconv"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	kubeconfigutil "sigs.k8s.io/cluster-api/util/kubeconfig"
)

// workloadRequestTimeout bounds one request to a workload API: a listener
// that is not back yet fails the attempt, and the wait polls again.
const workloadRequestTimeout = 5 * time.Second

// expectClusterProvisioned checks that the Cluster's MonolithCluster (its
// infrastructureRef: the template's, or one the topology controller made)
// is provisioned with a control plane endpoint, and that core saw it.
func expectClusterProvisioned(ctx context.Context, g Gomega, namespace, name string) {
	g.Expect(capiAlive()).To(Succeed())
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

// expectMachines checks that the cluster has exactly n Machines outside
// machine pools, each with a providerID, provisioned, in the phase given,
// and backed by a provisioned MonolithMachine with the same providerID; a
// Running Machine also has its Node (nodeRef, which core reads from the
// cluster's workload API). It returns the number of objects it checked.
func expectMachines(ctx context.Context, g Gomega, namespace, cluster string, n int, phase clusterv1.MachinePhase) int {
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
		g.Expect(m.Status.Phase).To(Equal(string(phase)), "Machine %s phase", m.Name)
		if phase == clusterv1.MachinePhaseRunning {
			g.Expect(m.Status.NodeRef.IsDefined()).To(BeTrue(), "Machine %s nodeRef", m.Name)
		}
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

// expectControlPlaneAvailable checks that the Cluster's control plane (the
// KubeadmControlPlane of its controlPlaneRef: the template's, or the one
// the topology controller made) is Available, every replica ready. KCP
// reaches Available only through the cluster's workload API (its Nodes,
// static Pods and etcd members). It returns the number of objects it
// checked.
func expectControlPlaneAvailable(ctx context.Context, g Gomega, namespace, name string) int {
	cluster := &clusterv1.Cluster{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, cluster)).To(Succeed())
	g.Expect(cluster.Spec.ControlPlaneRef.IsDefined()).To(BeTrue(), "Cluster %s/%s controlPlaneRef", namespace, name)
	kcp := &controlplanev1.KubeadmControlPlane{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: cluster.Spec.ControlPlaneRef.Name}, kcp)).To(Succeed())
	g.Expect(conditions.IsTrue(kcp, controlplanev1.KubeadmControlPlaneAvailableCondition)).To(BeTrue(), "KubeadmControlPlane %s Available", kcp.Name)
	g.Expect(kcp.Spec.Replicas).NotTo(BeNil())
	g.Expect(kcp.Status.ReadyReplicas).To(HaveValue(Equal(*kcp.Spec.Replicas)), "KubeadmControlPlane %s ready replicas", kcp.Name)
	return 1
}

// expectWorkloadAPI checks that the cluster's workload API answers on the
// MonolithCluster's endpoint, which must still be recorded (the endpoint
// the cluster had when the first fault hit it, if one did): through the
// `<cluster>-kubeconfig` a user gets, its Nodes are exactly the cluster's
// machines and pool instances (by providerID). It returns the number of
// Nodes it checked.
func expectWorkloadAPI(ctx context.Context, g Gomega, namespace, name, recorded string) int {
	cluster := &clusterv1.Cluster{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, cluster)).To(Succeed())
	endpoint, err := endpointOf(ctx, namespace, cluster.Spec.InfrastructureRef.Name)
	g.Expect(err).NotTo(HaveOccurred())
	if recorded != "" {
		g.Expect(endpoint).To(Equal(recorded), "Cluster %s/%s keeps the endpoint recorded before the faults", namespace, name)
	}

	kubeconfig, err := kubeconfigutil.FromSecret(ctx, env.Client, client.ObjectKey{Namespace: namespace, Name: name})
	g.Expect(err).NotTo(HaveOccurred(), "%s/%s-kubeconfig", namespace, name)
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cfg.Host).To(Equal("https://"+endpoint), "the kubeconfig names the endpoint")
	cfg.Timeout = workloadRequestTimeout
	workload, err := kubernetes.NewForConfig(cfg)
	g.Expect(err).NotTo(HaveOccurred())
	nodes, err := workload.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	g.Expect(err).NotTo(HaveOccurred(), "the workload API of %s/%s answers on %s", namespace, name, endpoint)
	var nodeIDs []string
	for _, n := range nodes.Items {
		nodeIDs = append(nodeIDs, n.Spec.ProviderID)
	}

	var want []string
	machines := &clusterv1.MachineList{}
	g.Expect(env.Client.List(ctx, machines, client.InNamespace(namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: name})).To(Succeed())
	for _, m := range machines.Items {
		if _, inPool := m.Labels[clusterv1.MachinePoolNameLabel]; !inPool {
			want = append(want, m.Spec.ProviderID)
		}
	}
	pools, err := list(ctx, monolithMachinePoolGVK, namespace)
	g.Expect(err).NotTo(HaveOccurred())
	for _, p := range pools {
		ids, _, _ := unstructured.NestedStringSlice(p.Object, "spec", "providerIDList")
		want = append(want, ids...)
	}
	g.Expect(nodeIDs).To(ConsistOf(want), "one Node per machine and instance in the workload API of %s/%s", namespace, name)
	return len(nodeIDs)
}

// endpointOf is the MonolithCluster's control plane endpoint as host:port,
// empty while it has none.
func endpointOf(ctx context.Context, namespace, name string) (string, error) {
	infra, err := get(ctx, monolithClusterGVK, namespace, name)
	if err != nil {
		return "", err
	}
	return endpointString(*infra), nil
}

func endpointString(infra unstructured.Unstructured) string {
	host, _, _ := unstructured.NestedString(infra.Object, "spec", "controlPlaneEndpoint", "host")
	port, _, _ := unstructured.NestedInt64(infra.Object, "spec", "controlPlaneEndpoint", "port")
	if host == "" || port == 0 {
		return ""
	}
	return net.JoinHostPort(host, strconv.FormatInt(port, 10))
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
	// Core counts the instances whose Node is ready in the workload API.
	mp := &clusterv1.MachinePool{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: pool}, mp)).To(Succeed())
	g.Expect(mp.Status.ReadyReplicas).To(HaveValue(BeEquivalentTo(n)), "MachinePool %s status.readyReplicas", pool)
	return 2 + len(instances) + len(machineInfra)
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
