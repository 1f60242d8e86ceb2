package machinepool_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/capi-monolith/capi-monolith/infra"
	infrav1 "github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/machinepool/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/modules"
	"github.com/capi-monolith/capi-monolith/test/managertest"
)

// start runs the binary's manager with the infra and machinepool modules
// (and more when given), until the test ends.
func start(t *testing.T, more ...modules.Module) {
	t.Helper()
	startWith(t, infra.DefaultOptions(), more...)
}

// startWith is start with the infra module's options.
func startWith(t *testing.T, infraOpts infra.Options, more ...modules.Module) {
	t.Helper()
	infraModule := infra.New(infraOpts)
	mods := append([]modules.Module{infraModule, managertest.Machinepool(infraModule)}, more...)
	managertest.Start(t, env.Config, managertest.Options(), mods...)
}

// scaleThrough scales the MachinePool through each count and checks the
// pool converges on it, as Cluster API core surfaces it.
// also checks more at each count (e.g. the backend's nodes).
func scaleThrough(t *testing.T, f fixture, also func(g Gomega, instances []infrav1.MonolithMachine), counts ...int) {
	t.Helper()
	for _, n := range counts {
		started := time.Now()
		f.scale(t, int32(n))
		NewWithT(t).Eventually(func(g Gomega) {
			instances := f.converged(g, n)
			if also != nil {
				also(g, instances)
			}
		}, timeout, poll).Should(Succeed(), "scaled to %d", n)
		t.Logf("Converged on %d instances in %s", n, time.Since(started).Round(time.Millisecond))
	}
}

func TestInMemoryPoolScalesWithMachinePoolMachines(t *testing.T) {
	start(t)
	f := newFixture(t, inMemory())
	scaleThrough(t, f, nil, 0, 3, 5, 2, 0)

	g := NewWithT(t)
	pool := &v1alpha1.MonolithMachinePool{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(f.pool), pool)).To(Succeed())
	g.Expect(pool.Spec.ProviderID).To(Equal("monolith-pool:///" + f.ns + "/p"))
	g.Expect(conditions.IsTrue(pool, clusterv1.ReadyCondition)).To(BeTrue())
	g.Expect(conditions.IsFalse(pool, clusterv1.PausedCondition)).To(BeTrue())
}

func TestScaleDownRemovesTheInstanceWhoseMachineIsAnnotatedFirst(t *testing.T) {
	start(t)
	f := newFixture(t, inMemory())
	scaleThrough(t, f, nil, 3)
	g := NewWithT(t)
	// The newest instance, which age alone would keep.
	instances := f.instances(g)
	newest := instances[0]
	for _, mm := range instances {
		if newest.CreationTimestamp.Before(&mm.CreationTimestamp) {
			newest = mm
		}
	}
	m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: newest.Name}}
	get(g, m)
	patch := client.MergeFrom(m.DeepCopy())
	m.Annotations = map[string]string{clusterv1.DeleteMachineAnnotation: ""}
	g.Expect(env.Client.Patch(ctx, m, patch)).To(Succeed())

	f.scale(t, 2)
	g.Eventually(func(g Gomega) {
		left := f.converged(g, 2)
		g.Expect(names(ptrs(left))).NotTo(ContainElement(newest.Name))
	}, timeout, poll).Should(Succeed())
}

func TestDeletingAMachineReplacesItsInstance(t *testing.T) {
	start(t)
	f := newFixture(t, inMemory())
	before := names(ptrs(scaleAndGet(t, f, 2)))
	g := NewWithT(t)
	g.Expect(env.Client.Delete(ctx, &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: before[0]}})).To(Succeed())
	g.Eventually(func(g Gomega) {
		after := names(ptrs(f.converged(g, 2)))
		g.Expect(after).NotTo(ContainElement(before[0]), "the instance went with its Machine")
		g.Expect(after).To(ContainElement(before[1]))
	}, timeout, poll).Should(Succeed())
}

func scaleAndGet(t *testing.T, f fixture, n int) []infrav1.MonolithMachine {
	t.Helper()
	f.scale(t, int32(n))
	var got []infrav1.MonolithMachine
	NewWithT(t).Eventually(func(g Gomega) { got = f.converged(g, n) }, timeout, poll).Should(Succeed())
	return got
}

func TestTemplateChangeRollsTheInstancesWithinMaxSurge(t *testing.T) {
	start(t)
	f := newFixture(t, inMemory())
	before := names(ptrs(scaleAndGet(t, f, 3)))

	g := NewWithT(t)
	pool := &v1alpha1.MonolithMachinePool{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(f.pool), pool)).To(Succeed())
	patch := client.MergeFrom(pool.DeepCopy())
	pool.Spec.Template.Backend.InMemory.ProvisioningDelay = &metav1.Duration{Duration: 100 * time.Millisecond}
	g.Expect(env.Client.Patch(ctx, pool, patch)).To(Succeed())

	// Default bounds: maxSurge 1, maxUnavailable 0, sampled while rolling.
	// An instance whose Machine is being deleted (drained) no longer
	// counts: the pool replaces it. Machines are listed after instances,
	// so a sample never counts an instance made after a deletion it missed.
	most, fewestReady := 0, 3
	g.Eventually(func(g Gomega) {
		all := f.instances(g)
		going := map[string]bool{}
		for _, m := range f.machines(g) {
			going[m.Name] = m.DeletionTimestamp != nil
		}
		live, ready := 0, 0
		for _, mm := range all {
			if mm.DeletionTimestamp != nil || going[mm.Name] {
				continue
			}
			live++
			if ptr.Deref(mm.Status.Initialization.Provisioned, false) && conditions.IsTrue(&mm, infrav1.BootstrapExecSucceededCondition) {
				ready++
			}
		}
		most, fewestReady = max(most, live), min(fewestReady, ready)
		after := f.converged(g, 3)
		for _, mm := range after {
			g.Expect(before).NotTo(ContainElement(mm.Name), "every instance was replaced")
		}
	}, timeout, 50*time.Millisecond).Should(Succeed())
	g.Expect(most).To(BeNumerically("<=", 4), "never more than replicas + maxSurge instances")
	// Instances and Machines are two reads: a sample may miss the one
	// instance that became ready between them.
	g.Expect(fewestReady).To(BeNumerically(">=", 2), "ready instances never drop below replicas - maxUnavailable (less one for the sample)")
}

func TestPausedPoolMakesNoChangesUntilUnpaused(t *testing.T) {
	start(t)
	f := newFixture(t, inMemory())
	before := names(ptrs(scaleAndGet(t, f, 1)))

	g := NewWithT(t)
	pool := &v1alpha1.MonolithMachinePool{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(f.pool), pool)).To(Succeed())
	patch := client.MergeFrom(pool.DeepCopy())
	pool.Annotations = map[string]string{clusterv1.PausedAnnotation: ""}
	g.Expect(env.Client.Patch(ctx, pool, patch)).To(Succeed())
	g.Eventually(func(g Gomega) bool {
		get(g, pool)
		return conditions.IsTrue(pool, clusterv1.PausedCondition)
	}, timeout, poll).Should(BeTrue())

	f.scale(t, 3)
	g.Consistently(func(g Gomega) {
		g.Expect(names(ptrs(f.instances(g)))).To(Equal(before))
	}, "3s", poll).Should(Succeed(), "a paused pool makes no instance")

	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(f.pool), pool)).To(Succeed())
	patch = client.MergeFrom(pool.DeepCopy())
	pool.Annotations = nil
	g.Expect(env.Client.Patch(ctx, pool, patch)).To(Succeed())
	g.Eventually(func(g Gomega) { f.converged(g, 3) }, timeout, poll).Should(Succeed())
	get(g, pool)
	g.Expect(conditions.IsFalse(pool, clusterv1.PausedCondition)).To(BeTrue())
}

func TestDeletingTheMachinePoolCleansEverythingUp(t *testing.T) {
	start(t)
	f := newFixture(t, inMemory())
	scaleAndGet(t, f, 2)

	g := NewWithT(t)
	g.Expect(env.Client.Delete(ctx, f.mp)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(f.instances(g)).To(BeEmpty())
		g.Expect(f.machines(g)).To(BeEmpty())
		gone(g, &v1alpha1.MonolithMachinePool{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "p"}})
		gone(g, &clusterv1.MachinePool{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "p"}})
	}, timeout, poll).Should(Succeed())
}

func TestAPoolWhoseBackendIsNotItsClustersFailsTerminally(t *testing.T) {
	start(t)
	opts := inMemory()
	opts.instance = v1alpha1.InstanceTemplate{Backend: infrav1.MachineBackend{Docker: &infrav1.DockerMachineBackend{}}}
	f := newFixture(t, opts)
	f.scale(t, 2)
	g := NewWithT(t)
	g.Eventually(func(g Gomega) {
		pool := &v1alpha1.MonolithMachinePool{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(f.pool), pool)).To(Succeed())
		cond := conditions.Get(pool, v1alpha1.InstancesReadyCondition)
		g.Expect(cond).NotTo(BeNil())
		g.Expect(cond.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(cond.Reason).To(Equal(v1alpha1.InvalidConfigurationReason))
		g.Expect(cond.Message).To(ContainSubstring("MonolithCluster c uses inMemory"))
		g.Expect(conditions.GetMessage(pool, clusterv1.ReadyCondition)).To(ContainSubstring("MonolithCluster c uses inMemory"), "the Ready summary, which core mirrors, says it too")
		// Not in the object at all, as the v1beta2 contract wants.
		raw := &unstructured.Unstructured{}
		raw.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("MonolithMachinePool"))
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(f.pool), raw)).To(Succeed())
		g.Expect(raw.Object["status"]).NotTo(HaveKey("failureReason"))
		g.Expect(raw.Object["status"]).NotTo(HaveKey("failureMessage"))
	}, timeout, poll).Should(Succeed())
	g.Expect(f.instances(g)).To(BeEmpty(), "no instance of a misconfigured pool")
}

func TestWatchFilterIgnoresPoolsWithoutTheLabel(t *testing.T) {
	opts := managertest.Options()
	opts.WatchFilterValue = "mine"
	infraModule := managertest.Infra()
	managertest.Start(t, env.Config, opts, infraModule, managertest.Machinepool(infraModule))
	fo := inMemory()
	fo.labels = map[string]string{clusterv1.WatchLabel: "mine"}
	f := newFixture(t, fo)
	mine := scaleAndGet(t, f, 1)
	g := NewWithT(t)
	g.Expect(mine[0].Labels).To(HaveKeyWithValue(clusterv1.WatchLabel, "mine"), "instances carry their pool's watch-filter label")

	fo.labels = nil
	theirs, theirMP := newPool(f.ns, "q", fo)
	theirMP.Spec.Replicas = ptr.To[int32](1)
	g.Expect(env.Client.Create(ctx, theirs)).To(Succeed())
	g.Expect(env.Client.Create(ctx, theirMP)).To(Succeed())
	g.Consistently(func(g Gomega) {
		get(g, theirs)
		g.Expect(theirs.Finalizers).To(BeEmpty())
		g.Expect(theirs.Status.Conditions).To(BeEmpty())
		list := &infrav1.MonolithMachineList{}
		g.Expect(env.Client.List(ctx, list, client.InNamespace(f.ns), client.MatchingLabels{clusterv1.MachinePoolNameLabel: "q"})).To(Succeed())
		g.Expect(list.Items).To(BeEmpty())
	}, "3s", poll).Should(Succeed())
}
