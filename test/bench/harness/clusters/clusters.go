// Package clusters creates workload clusters' worth of objects for the
// infrastructure benchmarks, as Cluster API core would have left them before
// the infrastructure provider acts: a Cluster whose infrastructure is
// provisioned, its MonolithCluster (inMemory backend), Machines with their
// bootstrap data Secret, the kubeconfig Secret, and optionally an IP pool per
// namespace. MonolithMachines are made by the benchmark itself, because when
// they are created is what most benchmarks measure.
package clusters

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	ipamv1alpha1 "github.com/capi-monolith/capi-monolith/ipam/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/test/kubeadmdata"
)

// PoolName is the MonolithIPPool CreatePool makes in a namespace.
const PoolName = "nodes"

// kubernetesVersion is the Machines' spec.version; the inMemory backend only
// records it.
const kubernetesVersion = "v1.36.3"

// Options describe one cluster.
type Options struct {
	Namespace string
	Name      string
	// Machines is how many Machines to create (named <cluster>-m<i>).
	Machines int
	// Pool makes the MonolithMachines of MonolithMachine() claim one address
	// each from the namespace's PoolName pool (see CreatePool).
	Pool bool
}

// Cluster is one created cluster.
type Cluster struct {
	Options
	Cluster  *clusterv1.Cluster
	Machines []*clusterv1.Machine
}

// Create makes the cluster's objects with c: Cluster (with
// status.initialization.infrastructureProvisioned set, as core does once the
// MonolithCluster is ready), MonolithCluster owned by it, the bootstrap data
// and kubeconfig Secrets, and opts.Machines Machines.
func Create(ctx context.Context, c client.Client, opts Options) (*Cluster, error) {
	labels := map[string]string{clusterv1.ClusterNameLabel: opts.Name}
	cluster := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: opts.Namespace, Name: opts.Name},
		Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
			APIGroup: infrav1.GroupVersion.Group, Kind: "MonolithCluster", Name: opts.Name}},
	}
	if err := c.Create(ctx, cluster); err != nil {
		return nil, fmt.Errorf("failed to create Cluster %s/%s: %w", opts.Namespace, opts.Name, err)
	}
	mc := &infrav1.MonolithCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: opts.Namespace, Name: opts.Name, Labels: labels,
			OwnerReferences: []metav1.OwnerReference{ownerRef(cluster.Name, cluster.UID, "Cluster")}},
		Spec: infrav1.MonolithClusterSpec{Backend: infrav1.ClusterBackend{InMemory: &infrav1.InMemoryClusterBackend{}}},
	}
	if err := c.Create(ctx, mc); err != nil {
		return nil, fmt.Errorf("failed to create MonolithCluster %s/%s: %w", opts.Namespace, opts.Name, err)
	}
	patch := client.MergeFrom(cluster.DeepCopy())
	cluster.Status.Initialization.InfrastructureProvisioned = ptr.To(true)
	if err := c.Status().Patch(ctx, cluster, patch); err != nil {
		return nil, fmt.Errorf("failed to mark Cluster %s/%s infrastructure provisioned: %w", opts.Namespace, opts.Name, err)
	}
	for _, s := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Namespace: opts.Namespace, Name: bootstrapSecret(opts.Name), Labels: labels},
			Type: clusterv1.ClusterSecretType, Data: map[string][]byte{"value": []byte(kubeadmdata.JoinWorker), "format": []byte("cloud-config")}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: opts.Namespace, Name: opts.Name + "-kubeconfig", Labels: labels},
			Type: clusterv1.ClusterSecretType, Data: map[string][]byte{"value": []byte("apiVersion: v1\nkind: Config\n")}},
	} {
		if err := c.Create(ctx, s); err != nil {
			return nil, fmt.Errorf("failed to create Secret %s/%s: %w", s.Namespace, s.Name, err)
		}
	}
	out := &Cluster{Options: opts, Cluster: cluster}
	for i := range opts.Machines {
		name := fmt.Sprintf("%s-m%d", opts.Name, i)
		m := &clusterv1.Machine{
			ObjectMeta: metav1.ObjectMeta{Namespace: opts.Namespace, Name: name, Labels: labels},
			Spec: clusterv1.MachineSpec{ClusterName: opts.Name, Version: kubernetesVersion,
				Bootstrap: clusterv1.Bootstrap{DataSecretName: ptr.To(bootstrapSecret(opts.Name))},
				InfrastructureRef: clusterv1.ContractVersionedObjectReference{
					APIGroup: infrav1.GroupVersion.Group, Kind: "MonolithMachine", Name: name}},
		}
		if err := c.Create(ctx, m); err != nil {
			return nil, fmt.Errorf("failed to create Machine %s/%s: %w", opts.Namespace, name, err)
		}
		out.Machines = append(out.Machines, m)
	}
	return out, nil
}

// MonolithMachine returns, uncreated, the inMemory MonolithMachine of Machine
// i, owned by it as core would have set.
func (cl *Cluster) MonolithMachine(i int) *infrav1.MonolithMachine {
	m := cl.Machines[i]
	mm := &infrav1.MonolithMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: m.Namespace, Name: m.Name,
			Labels:          map[string]string{clusterv1.ClusterNameLabel: cl.Name},
			OwnerReferences: []metav1.OwnerReference{ownerRef(m.Name, m.UID, "Machine")}},
		Spec: infrav1.MonolithMachineSpec{Backend: infrav1.MachineBackend{InMemory: &infrav1.InMemoryMachineBackend{}}},
	}
	if cl.Pool {
		group := ipamv1alpha1.GroupVersion.Group
		mm.Spec.AddressesFromPools = []corev1.TypedLocalObjectReference{{APIGroup: &group, Kind: ipamv1alpha1.MonolithIPPoolKind, Name: PoolName}}
	}
	return mm
}

// CreatePool makes the namespace's PoolName pool handing out the addresses
// of cidr with prefix and gateway (the gateway is never allocated).
func CreatePool(ctx context.Context, c client.Client, namespace, cidr string, prefix int32, gateway string) error {
	pool := &ipamv1alpha1.MonolithIPPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: PoolName},
		Spec:       ipamv1alpha1.IPPoolSpec{Addresses: []string{cidr}, Prefix: prefix, Gateway: gateway},
	}
	if err := c.Create(ctx, pool); err != nil {
		return fmt.Errorf("failed to create MonolithIPPool %s/%s: %w", namespace, PoolName, err)
	}
	return nil
}

func bootstrapSecret(cluster string) string { return cluster + "-bootstrap" }

func ownerRef(name string, uid types.UID, kind string) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: clusterv1.GroupVersion.String(), Kind: kind, Name: name, UID: uid,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
}
