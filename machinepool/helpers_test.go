package machinepool_test

import (
	"cmp"
	"context"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/labels/format"

	infrav1 "github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/machinepool/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/test/kubeadmdata"
)

const (
	// timeout bounds each wait for the pool, Cluster API core and the
	// backends to converge.
	timeout = 60 * time.Second
	poll    = 200 * time.Millisecond
	version = "v1.36.3"
)

var ctx = context.Background()

func get(g Gomega, obj client.Object) {
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj)).To(Succeed())
}

func gone(g Gomega, obj client.Object) {
	err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj)
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%T %s still exists (err %v)", obj, obj.GetName(), err)
}

// fixture is a provisioned Cluster (its MonolithCluster provisioned by the
// infra module, its infrastructure reported by Cluster API core, its
// kubeconfig pointing at the test apiserver so that core's ClusterCache
// connects) with one MachinePool of a MonolithMachinePool, at 0 replicas.
type fixture struct {
	ns      string
	cluster *clusterv1.Cluster
	mp      *clusterv1.MachinePool
	pool    *v1alpha1.MonolithMachinePool
}

type fixtureOptions struct {
	clusterBackend infrav1.ClusterBackend
	instance       v1alpha1.InstanceTemplate
	bootstrap      string
	// created runs once the test's namespace exists, before anything is
	// made in it (to register clean-ups).
	created func(ns string)
	// labels go on the Cluster, the MonolithCluster and the pool.
	labels map[string]string
}

func inMemory() fixtureOptions {
	return fixtureOptions{
		clusterBackend: infrav1.ClusterBackend{InMemory: &infrav1.InMemoryClusterBackend{}},
		instance:       v1alpha1.InstanceTemplate{Backend: infrav1.MachineBackend{InMemory: &infrav1.InMemoryMachineBackend{}}},
		bootstrap:      kubeadmdata.JoinWorker,
	}
}

func newFixture(t *testing.T, opts fixtureOptions) fixture {
	t.Helper()
	g := NewWithT(t)
	ns, err := env.CreateNamespace(ctx, "pool")
	g.Expect(err).NotTo(HaveOccurred())
	n := ns.Name
	recordNamespace(n)
	if opts.created != nil {
		opts.created(n)
	}

	kubeconfig, err := env.Kubeconfig()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: n, Name: "c-kubeconfig", Labels: map[string]string{clusterv1.ClusterNameLabel: "c"}},
		Data:       map[string][]byte{"value": kubeconfig},
	})).To(Succeed())
	g.Expect(env.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: n, Name: "boot"},
		Data:       map[string][]byte{"value": []byte(opts.bootstrap), "format": []byte("cloud-config")},
	})).To(Succeed())
	cluster := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: n, Name: "c", Labels: opts.labels},
		Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
			APIGroup: infrav1.GroupVersion.Group, Kind: "MonolithCluster", Name: "c"}},
	}
	g.Expect(env.Client.Create(ctx, cluster)).To(Succeed())
	g.Expect(env.Client.Create(ctx, &infrav1.MonolithCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: n, Name: "c", Labels: opts.labels},
		Spec:       infrav1.MonolithClusterSpec{Backend: opts.clusterBackend},
	})).To(Succeed())

	pool, mp := newPool(n, "p", opts)
	g.Expect(env.Client.Create(ctx, pool)).To(Succeed())
	g.Expect(env.Client.Create(ctx, mp)).To(Succeed())
	g.Eventually(func(g Gomega) {
		get(g, cluster)
		g.Expect(cluster.Status.Initialization.InfrastructureProvisioned).To(Equal(ptr.To(true)))
	}, timeout, poll).Should(Succeed(), "Cluster API core reports the cluster's infrastructure")
	return fixture{ns: n, cluster: cluster, mp: mp, pool: pool}
}

// newPool returns a MonolithMachinePool and its MachinePool (0 replicas)
// in cluster c.
func newPool(ns, name string, opts fixtureOptions) (*v1alpha1.MonolithMachinePool, *clusterv1.MachinePool) {
	pool := &v1alpha1.MonolithMachinePool{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: opts.labels},
		Spec:       v1alpha1.MonolithMachinePoolSpec{Template: opts.instance},
	}
	mp := &clusterv1.MachinePool{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: clusterv1.MachinePoolSpec{
			ClusterName: "c",
			Replicas:    ptr.To[int32](0),
			Template: clusterv1.MachineTemplateSpec{Spec: clusterv1.MachineSpec{
				ClusterName: "c",
				Version:     version,
				Bootstrap:   clusterv1.Bootstrap{DataSecretName: ptr.To("boot")},
				InfrastructureRef: clusterv1.ContractVersionedObjectReference{
					APIGroup: v1alpha1.GroupVersion.Group, Kind: "MonolithMachinePool", Name: name},
			}},
		},
	}
	return pool, mp
}

// scale sets the MachinePool's replicas, as a user (or an autoscaler) does.
func (f fixture) scale(t *testing.T, replicas int32) {
	t.Helper()
	g := NewWithT(t)
	g.Eventually(func() error {
		mp := &clusterv1.MachinePool{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(f.mp), mp); err != nil {
			return err
		}
		mp.Spec.Replicas = ptr.To(replicas)
		return env.Client.Update(ctx, mp)
	}, timeout, poll).Should(Succeed())
}

// instances are the pool's MonolithMachines, by name.
func (f fixture) instances(g Gomega) []infrav1.MonolithMachine {
	list := &infrav1.MonolithMachineList{}
	g.Expect(env.Client.List(ctx, list, client.InNamespace(f.ns), client.MatchingLabels{
		clusterv1.ClusterNameLabel: "c", clusterv1.MachinePoolNameLabel: format.MustFormatValue(f.mp.Name),
	})).To(Succeed())
	slices.SortFunc(list.Items, func(a, b infrav1.MonolithMachine) int { return cmp.Compare(a.Name, b.Name) })
	return list.Items
}

// machines are the MachinePool's Machines, by name.
func (f fixture) machines(g Gomega) []clusterv1.Machine {
	list := &clusterv1.MachineList{}
	g.Expect(env.Client.List(ctx, list, client.InNamespace(f.ns), client.MatchingLabels{
		clusterv1.ClusterNameLabel: "c", clusterv1.MachinePoolNameLabel: format.MustFormatValue(f.mp.Name),
	})).To(Succeed())
	slices.SortFunc(list.Items, func(a, b clusterv1.Machine) int { return cmp.Compare(a.Name, b.Name) })
	return list.Items
}

func names[T client.Object](objs []T) []string {
	out := make([]string, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.GetName())
	}
	return out
}

func ptrs[T any](items []T) []*T {
	out := make([]*T, 0, len(items))
	for i := range items {
		out = append(out, &items[i])
	}
	return out
}

// converged checks everything the contract and MachinePool Machines
// promise once the pool holds n instances: n ready MonolithMachines, one
// Machine per instance made by Cluster API core, the pool's providerIDList
// exactly their provider IDs (sorted), status.replicas and
// status.instances, and the MachinePool surfacing them.
func (f fixture) converged(g Gomega, n int) []infrav1.MonolithMachine {
	instances := f.instances(g)
	g.Expect(instances).To(HaveLen(n), "instances")
	var ids []string
	for i := range instances {
		mm := &instances[i]
		g.Expect(mm.DeletionTimestamp).To(BeNil(), "instance %s is being deleted", mm.Name)
		g.Expect(mm.Spec.ProviderID).NotTo(BeEmpty(), "instance %s has a node", mm.Name)
		g.Expect(mm.Status.Initialization.Provisioned).To(Equal(ptr.To(true)))
		g.Expect(conditions.IsTrue(mm, clusterv1.ReadyCondition)).To(BeTrue(), "instance %s Ready", mm.Name)
		g.Expect(mm.Finalizers).To(Equal([]string{infrav1.MachineFinalizer}),
			"instance %s has the one MonolithMachine controller's finalizer, and no other", mm.Name)
		g.Expect(mm.OwnerReferences).To(ContainElement(And(HaveField("Kind", "MonolithMachinePool"), HaveField("Name", f.pool.Name))))
		g.Expect(mm.OwnerReferences).To(ContainElement(And(HaveField("Kind", "Machine"), HaveField("Name", mm.Name), HaveField("Controller", ptr.To(true)))),
			"Cluster API core adopted instance %s with its Machine", mm.Name)
		ids = append(ids, mm.Spec.ProviderID)
	}
	slices.Sort(ids)

	machines := f.machines(g)
	g.Expect(names(ptrs(machines))).To(Equal(names(ptrs(instances))), "one Machine per instance, of the same name")
	for _, m := range machines {
		g.Expect(m.Spec.InfrastructureRef.Kind).To(Equal("MonolithMachine"))
		g.Expect(m.Spec.InfrastructureRef.Name).To(Equal(m.Name))
	}

	pool := &v1alpha1.MonolithMachinePool{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(f.pool), pool)).To(Succeed())
	if n == 0 {
		g.Expect(pool.Spec.ProviderIDList).To(BeEmpty())
	} else {
		g.Expect(pool.Spec.ProviderIDList).To(Equal(ids))
	}
	g.Expect(pool.Status.Replicas).To(Equal(int32(n)))
	g.Expect(pool.Status.Ready).To(BeTrue())
	g.Expect(pool.Status.Initialization.Provisioned).To(Equal(ptr.To(true)))
	g.Expect(pool.Status.InfrastructureMachineKind).To(Equal("MonolithMachine"))
	g.Expect(pool.Status.Instances).To(HaveLen(n))
	for i, st := range pool.Status.Instances {
		g.Expect(st.InstanceName).To(Equal(instances[i].Name))
		g.Expect(st.ProviderID).To(Equal(ptr.To(instances[i].Spec.ProviderID)))
		g.Expect(st.Ready).To(BeTrue(), "instance %s ready", st.InstanceName)
		g.Expect(st.Version).To(Equal(ptr.To(version)))
		g.Expect(st.Addresses).NotTo(BeEmpty())
	}

	mp := &clusterv1.MachinePool{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(f.mp), mp)).To(Succeed())
	g.Expect(mp.Status.Initialization.InfrastructureProvisioned).To(Equal(ptr.To(true)), "Cluster API core reads status.ready")
	g.Expect(ptr.Deref(mp.Status.Replicas, 0)).To(Equal(int32(n)), "Cluster API core surfaces status.replicas")
	if n == 0 {
		g.Expect(mp.Spec.ProviderIDList).To(BeEmpty())
	} else {
		g.Expect(mp.Spec.ProviderIDList).To(Equal(ids), "Cluster API core surfaces spec.providerIDList")
	}
	return instances
}
