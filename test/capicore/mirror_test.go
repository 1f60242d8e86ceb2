package capicore_test

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	infrav1 "github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	ipamv1alpha1 "github.com/capi-monolith/capi-monolith/ipam/api/v1alpha1"
	poolv1alpha1 "github.com/capi-monolith/capi-monolith/machinepool/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/modules"
	"github.com/capi-monolith/capi-monolith/test/capicore"
	"github.com/capi-monolith/capi-monolith/test/kubeadmdata"
	"github.com/capi-monolith/capi-monolith/test/managertest"
)

// The tests of this file run Cluster API core beside the binary's own
// manager and check what core makes of our objects' status: core mirrors
// an infra machine's Ready onto the Machine's InfrastructureReady, and an
// InfraMachinePool's Ready onto the MachinePool's (v1beta1)
// InfrastructureReady.

const (
	timeout = 60 * time.Second
	poll    = 200 * time.Millisecond
)

func addToScheme(s *runtime.Scheme) error {
	for _, add := range []func(*runtime.Scheme) error{infrav1.AddToScheme, poolv1alpha1.AddToScheme, ipamv1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			return err
		}
	}
	return nil
}

// output keeps the whole output of a process (capicore keeps only its last
// lines), safe for the process's writes and the test's reads at once.
type output struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.Write(p)
}

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// panics are the lines of out that tell of a panic: controller-runtime
// recovers a reconciler's panic and logs it ("Observed a panic"), so a
// panicking core goes on running and only its log says so.
func panics(out string) []string {
	var lines []string
	for line := range strings.Lines(out) {
		if strings.Contains(strings.ToLower(line), "panic") {
			lines = append(lines, line)
		}
	}
	return lines
}

// startCoreAndManager runs Cluster API core, its whole output kept, and the
// binary's manager with mods, until the test ends (the manager stops
// first).
func startCoreAndManager(t *testing.T, mods ...modules.Module) *output {
	t.Helper()
	g := NewWithT(t)
	out := &output{}
	core, err := capicore.Start(t.Context(), capicore.Options{Config: env.Config, Output: out})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("Cluster API core output:\n%s", core.Output())
		}
		_ = core.Stop()
	})
	managertest.Start(t, env.Config, managertest.Options(), mods...)
	return out
}

// newCluster makes a Cluster c of an inMemory MonolithCluster in a new
// namespace, its kubeconfig pointing at the test apiserver (for core's
// ClusterCache), a bootstrap data Secret "boot" of kubeadm data, and
// returns the namespace once core reports the cluster's infrastructure.
func newCluster(t *testing.T) string {
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	ns, err := env.CreateNamespace(ctx, "mirror")
	g.Expect(err).NotTo(HaveOccurred())
	n := ns.Name
	kubeconfig, err := env.Kubeconfig()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: n, Name: "c-kubeconfig", Labels: map[string]string{clusterv1.ClusterNameLabel: "c"}},
		Data:       map[string][]byte{"value": kubeconfig},
	})).To(Succeed())
	g.Expect(env.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: n, Name: "boot"},
		Data:       map[string][]byte{"value": []byte(kubeadmdata.JoinWorker), "format": []byte("cloud-config")},
	})).To(Succeed())
	cluster := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: n, Name: "c"},
		Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
			APIGroup: infrav1.GroupVersion.Group, Kind: "MonolithCluster", Name: "c"}},
	}
	g.Expect(env.Client.Create(ctx, cluster)).To(Succeed())
	g.Expect(env.Client.Create(ctx, &infrav1.MonolithCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: n, Name: "c"},
		Spec:       infrav1.MonolithClusterSpec{Backend: infrav1.ClusterBackend{InMemory: &infrav1.InMemoryClusterBackend{}}},
	})).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(cluster), cluster)).To(Succeed())
		g.Expect(cluster.Status.Initialization.InfrastructureProvisioned).To(Equal(ptr.To(true)))
	}, timeout, poll).Should(Succeed(), "Cluster API core reports the cluster's infrastructure")
	return n
}

// newMachine makes a Machine of cluster c and its inMemory MonolithMachine,
// which asks pool for an address.
func newMachine(t *testing.T, ns, name, pool string) {
	t.Helper()
	g := NewWithT(t)
	group := ipamv1alpha1.GroupVersion.Group
	g.Expect(env.Client.Create(t.Context(), &infrav1.MonolithMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: infrav1.MonolithMachineSpec{
			Backend:            infrav1.MachineBackend{InMemory: &infrav1.InMemoryMachineBackend{}},
			AddressesFromPools: []corev1.TypedLocalObjectReference{{APIGroup: &group, Kind: ipamv1alpha1.MonolithIPPoolKind, Name: pool}},
		},
	})).To(Succeed())
	g.Expect(env.Client.Create(t.Context(), &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: clusterv1.MachineSpec{
			ClusterName: "c", Version: "v1.36.3",
			Bootstrap:         clusterv1.Bootstrap{DataSecretName: ptr.To("boot")},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "MonolithMachine", Name: name},
		},
	})).To(Succeed())
}

// machineCondition returns the Machine's condition conditionType as core
// set it.
func machineCondition(g Gomega, ns, name, conditionType string) metav1.Condition {
	m := &clusterv1.Machine{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, m)).To(Succeed())
	c := conditions.Get(m, conditionType)
	g.Expect(c).NotTo(BeNil(), "Machine %s has no %s", name, conditionType)
	return *c
}

func TestAnExhaustedPoolShowsOnTheMachineWithItsReasonAndThePoolsName(t *testing.T) {
	out := startCoreAndManager(t, managertest.Infra(), managertest.IPAM())
	ns := newCluster(t)
	g := NewWithT(t)
	ctx := t.Context()
	pool := &ipamv1alpha1.MonolithIPPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nodes"},
		Spec:       ipamv1alpha1.IPPoolSpec{Addresses: []string{"10.40.0.10-10.40.0.10"}, Prefix: 24},
	}
	g.Expect(env.Client.Create(ctx, pool)).To(Succeed())

	// The first machine takes the pool's one address.
	newMachine(t, ns, "m1", "nodes")
	g.Eventually(func(g Gomega) {
		c := machineCondition(g, ns, "m1", clusterv1.MachineInfrastructureReadyCondition)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue), "%s: %s", c.Reason, c.Message)
	}, timeout, poll).Should(Succeed())

	// The second finds the pool exhausted, and its Machine says so: core
	// mirrors the MonolithMachine's Ready, reason and message.
	newMachine(t, ns, "m2", "nodes")
	g.Eventually(func(g Gomega) {
		c := machineCondition(g, ns, "m2", clusterv1.MachineInfrastructureReadyCondition)
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(ipamv1.IPAddressClaimReadyPoolExhaustedReason))
		g.Expect(c.Message).To(HavePrefix("* IPAddressesClaimed: IPAddressClaim m2-0: PoolExhausted: MonolithIPPool " + ns + "/nodes has no free address; Waiting for 1 of 1 IP addresses"))
		g.Expect(c.Message).To(ContainSubstring("* BackendMachineProvisioned: WaitingForIPAddresses"))
		ready := machineCondition(g, ns, "m2", clusterv1.MachineReadyCondition)
		g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(ready.Message).To(ContainSubstring("MonolithIPPool "+ns+"/nodes has no free address"), "the Machine's Ready says it too")
	}, timeout, poll).Should(Succeed())

	// The opposite: once the pool has room, the machine gets its address
	// and the reason is gone from the Machine.
	patch := client.MergeFrom(pool.DeepCopy())
	pool.Spec.Addresses = []string{"10.40.0.10-10.40.0.11"}
	g.Expect(env.Client.Patch(ctx, pool, patch)).To(Succeed())
	g.Eventually(func(g Gomega) {
		c := machineCondition(g, ns, "m2", clusterv1.MachineInfrastructureReadyCondition)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue), "%s: %s", c.Reason, c.Message)
		g.Expect(c.Reason).NotTo(Equal("PoolExhausted"))
		g.Expect(c.Message).NotTo(ContainSubstring("PoolExhausted"))
		mm := &infrav1.MonolithMachine{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "m2"}, mm)).To(Succeed())
		g.Expect(mm.Status.Addresses).To(ContainElement(clusterv1.MachineAddress{Type: clusterv1.MachineInternalIP, Address: "10.40.0.11"}))
	}, timeout, poll).Should(Succeed())
	g.Expect(panics(out.String())).To(BeEmpty(), "Cluster API core's log")
}

// A terminal failure of a MonolithMachinePool is a condition only (no
// status.failureReason, on which Cluster API v1.14.2 core's MachinePool code
// dereferenced nil and panicked on every reconcile): core mirrors the
// pool's Ready, reason and message, onto the MachinePool, and its log has
// no panic.
func TestAMachinePoolsTerminalFailureShowsOnTheMachinePoolAndCoreDoesNotPanic(t *testing.T) {
	infraModule := managertest.Infra()
	out := startCoreAndManager(t, infraModule, managertest.Machinepool(infraModule))
	ns := newCluster(t)
	g := NewWithT(t)
	ctx := t.Context()
	// A docker instance in an inMemory cluster: InvalidConfiguration, for
	// good.
	g.Expect(env.Client.Create(ctx, &poolv1alpha1.MonolithMachinePool{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p"},
		Spec: poolv1alpha1.MonolithMachinePoolSpec{Template: poolv1alpha1.InstanceTemplate{
			Backend: infrav1.MachineBackend{Docker: &infrav1.DockerMachineBackend{}}}},
	})).To(Succeed())
	mp := &clusterv1.MachinePool{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p"},
		Spec: clusterv1.MachinePoolSpec{
			ClusterName: "c",
			Replicas:    ptr.To[int32](2),
			Template: clusterv1.MachineTemplateSpec{Spec: clusterv1.MachineSpec{
				ClusterName: "c", Version: "v1.36.3",
				Bootstrap: clusterv1.Bootstrap{DataSecretName: ptr.To("boot")},
				InfrastructureRef: clusterv1.ContractVersionedObjectReference{
					APIGroup: poolv1alpha1.GroupVersion.Group, Kind: "MonolithMachinePool", Name: "p"},
			}},
		},
	}
	g.Expect(env.Client.Create(ctx, mp)).To(Succeed())

	// Core mirrors the pool's Ready into the MachinePool's (v1beta1)
	// InfrastructureReady after reading the pool's failure fields in the
	// same reconcile: the mirror is there only if that code ran through.
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(mp), mp)).To(Succeed())
		g.Expect(mp.Status.Deprecated).NotTo(BeNil())
		g.Expect(mp.Status.Deprecated.V1Beta1).NotTo(BeNil())
		var infra *clusterv1.Condition
		for i, c := range mp.Status.Deprecated.V1Beta1.Conditions {
			if c.Type == clusterv1.InfrastructureReadyV1Beta1Condition {
				infra = &mp.Status.Deprecated.V1Beta1.Conditions[i]
			}
		}
		g.Expect(infra).NotTo(BeNil(), "the MachinePool's InfrastructureReady")
		g.Expect(infra.Status).To(Equal(corev1.ConditionFalse))
		g.Expect(infra.Reason).To(Equal(poolv1alpha1.InvalidConfigurationReason))
		g.Expect(infra.Message).To(ContainSubstring("MonolithCluster c uses inMemory"))
		g.Expect(infra.Message).To(ContainSubstring("* InstancesReady:"))
		g.Expect(mp.Status.Deprecated.V1Beta1.FailureReason).To(BeNil(), "no failure field: nothing to read one from")
		g.Expect(mp.Status.Deprecated.V1Beta1.FailureMessage).To(BeNil())
	}, timeout, poll).Should(Succeed())
	g.Expect(ptr.Deref(mp.Status.Initialization.InfrastructureProvisioned, false)).To(BeFalse())
	g.Expect(panics(out.String())).To(BeEmpty(), "Cluster API core's log")
	// Core's reconciles of the MachinePool go on (a change of it is
	// reconciled again) and still do not panic.
	g.Eventually(func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(mp), mp); err != nil {
			return err
		}
		mp.Spec.Replicas = ptr.To[int32](3)
		return env.Client.Update(ctx, mp)
	}, timeout, poll).Should(Succeed())
	g.Eventually(func(g Gomega) {
		pool := &poolv1alpha1.MonolithMachinePool{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "p"}, pool)).To(Succeed())
		g.Expect(conditions.GetReason(pool, clusterv1.ReadyCondition)).To(Equal(poolv1alpha1.InvalidConfigurationReason))
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(mp), mp)).To(Succeed())
		g.Expect(mp.Status.ObservedGeneration).To(Equal(mp.Generation), "core reconciled the change")
	}, timeout, poll).Should(Succeed())
	// The log checked is the one of those reconciles: core logged that it
	// read the failed pool, past its failure fields.
	g.Expect(out.String()).To(ContainSubstring(`"Infrastructure provider is not yet ready" controller="machinepool"`))
	g.Expect(out.String()).To(ContainSubstring(`MachinePool="` + ns + `/p"`))
	g.Expect(panics(out.String())).To(BeEmpty(), "Cluster API core's log")
}
