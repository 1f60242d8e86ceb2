package scaffold_test

import (
	"context"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/capi-monolith/capi-monolith/contracts/scaffold"
	"github.com/capi-monolith/capi-monolith/contracts/watch"
)

const (
	finalizer        = "test.capi-monolith.dev/release"
	reconciledMarker = "test.capi-monolith.dev/reconciled"
	staleMarker      = "test.capi-monolith.dev/stale"
	timeout          = 20 * time.Second
	quiet            = 2 * time.Second
)

// phases marks the object on every normal reconcile and records deletions.
type phases struct {
	mu      sync.Mutex
	deleted map[string]bool
}

func (p *phases) ReconcileNormal(_ context.Context, s *scaffold.Scope[*ipamv1.IPAddressClaim]) (ctrl.Result, error) {
	if _, ok := s.Object.Annotations[staleMarker]; ok {
		s.Object.Annotations[reconciledMarker] = "true"
		s.Stale = true
		return ctrl.Result{}, nil
	}
	if s.Object.Annotations == nil {
		s.Object.Annotations = map[string]string{}
	}
	s.Object.Annotations[reconciledMarker] = "true"
	return ctrl.Result{}, nil
}

func (p *phases) ReconcileDelete(_ context.Context, s *scaffold.Scope[*ipamv1.IPAddressClaim]) (ctrl.Result, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.deleted[s.Object.Name] = true
	return ctrl.Result{}, nil
}

func (p *phases) UpdateStatus(_ context.Context, s *scaffold.Scope[*ipamv1.IPAddressClaim]) {
	conditions.Set(s.Object, metav1.Condition{Type: clusterv1.ReadyCondition, Status: metav1.ConditionTrue, Reason: "Reconciled"})
}

func (p *phases) wasDeleted(name string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.deleted[name]
}

type setup struct {
	watchFilter      string
	requireCluster   bool
	soleStatusWriter bool
}

// startController runs the scaffold for IPAddressClaims of one namespace on
// its own manager, wired with contracts/watch as a module would wire it.
func startController(t *testing.T, namespace string, s setup) *phases {
	t.Helper()
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:     env.Scheme,
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Cache:      cache.Options{DefaultNamespaces: map[string]cache.Config{namespace: {}}},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	g.Expect(err).NotTo(HaveOccurred())

	p := &phases{deleted: map[string]bool{}}
	r, err := scaffold.New(scaffold.Options[*ipamv1.IPAddressClaim]{
		Client:           mgr.GetClient(),
		NewObject:        func() *ipamv1.IPAddressClaim { return &ipamv1.IPAddressClaim{} },
		Phases:           p,
		Finalizer:        finalizer,
		GetCluster:       scaffold.ClusterFromLabel[*ipamv1.IPAddressClaim],
		RequireCluster:   s.requireCluster,
		WatchFilterValue: s.watchFilter,
		OwnedConditions:  []string{clusterv1.ReadyCondition},
		SoleStatusWriter: s.soleStatusWriter,
	})
	g.Expect(err).NotTo(HaveOccurred())
	clusterToClaims, err := watch.ClusterToObjects(mgr.GetClient(), &ipamv1.IPAddressClaimList{}, mgr.GetScheme())
	g.Expect(err).NotTo(HaveOccurred())
	log := ctrl.Log.WithName("test")
	err = ctrl.NewControllerManagedBy(mgr).
		For(&ipamv1.IPAddressClaim{}).
		WithEventFilter(watch.Filter(mgr.GetScheme(), log, s.watchFilter)).
		Watches(&clusterv1.Cluster{}, clusterToClaims).
		Complete(r)
	g.Expect(err).NotTo(HaveOccurred())

	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		g.Expect(<-done).To(Succeed())
	})
	return p
}

func newNamespace(t *testing.T) string {
	t.Helper()
	ns, err := env.CreateNamespace(context.Background(), "scaffold")
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return ns.Name
}

func newCluster(t *testing.T, namespace, name string, paused bool) *clusterv1.Cluster {
	t.Helper()
	c := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       clusterv1.ClusterSpec{Paused: ptr.To(paused)},
	}
	NewWithT(t).Expect(env.Client.Create(context.Background(), c)).To(Succeed())
	return c
}

func newClaim(t *testing.T, namespace, name string, labels, annotations map[string]string) *ipamv1.IPAddressClaim {
	t.Helper()
	c := &ipamv1.IPAddressClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels, Annotations: annotations},
		Spec: ipamv1.IPAddressClaimSpec{
			PoolRef: ipamv1.IPPoolReference{APIGroup: "ipam.test.dev", Kind: "Pool", Name: "pool"},
		},
	}
	NewWithT(t).Expect(env.Client.Create(context.Background(), c)).To(Succeed())
	return c
}

func get(g Gomega, obj client.Object) client.Object {
	g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)).To(Succeed())
	return obj
}

func reconciled(g Gomega, c *ipamv1.IPAddressClaim) bool {
	return get(g, c).GetAnnotations()[reconciledMarker] == "true"
}

func pausedStatus(g Gomega, c *ipamv1.IPAddressClaim) metav1.ConditionStatus {
	get(g, c)
	if cond := conditions.Get(c, clusterv1.PausedCondition); cond != nil {
		return cond.Status
	}
	return ""
}

func TestFinalizerIsAddedThenRemovedOnDelete(t *testing.T) {
	for _, tt := range []struct {
		name string
		s    setup
	}{
		{name: "with Cluster API's patch helper"},
		{name: "as the sole writer of the status", s: setup{soleStatusWriter: true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			ns := newNamespace(t)
			p := startController(t, ns, tt.s)
			newCluster(t, ns, "c1", false)
			claim := newClaim(t, ns, "claim", map[string]string{clusterv1.ClusterNameLabel: "c1"}, nil)

			g.Eventually(func(g Gomega) {
				g.Expect(controllerutil.ContainsFinalizer(get(g, claim), finalizer)).To(BeTrue())
				g.Expect(reconciled(g, claim)).To(BeTrue())
				g.Expect(conditions.IsTrue(claim, clusterv1.ReadyCondition)).To(BeTrue())
				g.Expect(pausedStatus(g, claim)).To(Equal(metav1.ConditionFalse))
			}, timeout).Should(Succeed())

			g.Expect(env.Client.Delete(context.Background(), claim)).To(Succeed())
			g.Eventually(func() bool {
				return env.Client.Get(context.Background(), client.ObjectKeyFromObject(claim), &ipamv1.IPAddressClaim{}) != nil
			}, timeout).Should(BeTrue(), "the finalizer must be removed so that the claim goes away")
			g.Expect(p.wasDeleted("claim")).To(BeTrue(), "the delete phase must run before the finalizer is removed")
		})
	}
}

func TestAStaleObjectIsNotPatched(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	startController(t, ns, setup{})
	newCluster(t, ns, "c1", false)
	claim := newClaim(t, ns, "claim", map[string]string{clusterv1.ClusterNameLabel: "c1"}, map[string]string{staleMarker: ""})

	g.Eventually(func(g Gomega) {
		g.Expect(controllerutil.ContainsFinalizer(get(g, claim), finalizer)).To(BeTrue())
	}, timeout).Should(Succeed())
	g.Consistently(func(g Gomega) {
		get(g, claim)
		g.Expect(claim.Annotations).NotTo(HaveKey(reconciledMarker), "nothing the phase changed is written")
		g.Expect(claim.Status.Conditions).To(BeEmpty(), "not even the scaffold's own conditions")
	}, quiet).Should(Succeed())

	patch := client.MergeFrom(claim.DeepCopy())
	delete(claim.Annotations, staleMarker)
	g.Expect(env.Client.Patch(context.Background(), claim, patch)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(reconciled(g, claim)).To(BeTrue())
		g.Expect(pausedStatus(g, claim)).To(Equal(metav1.ConditionFalse))
	}, timeout).Should(Succeed())
}

func TestPausedClusterStopsReconcileAndUnpausingResumes(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	startController(t, ns, setup{})
	cluster := newCluster(t, ns, "c1", true)
	claim := newClaim(t, ns, "claim", map[string]string{clusterv1.ClusterNameLabel: "c1"}, nil)

	g.Eventually(func(g Gomega) {
		g.Expect(pausedStatus(g, claim)).To(Equal(metav1.ConditionTrue))
		g.Expect(conditions.Get(claim, clusterv1.PausedCondition).Message).To(ContainSubstring("Cluster spec.paused is set to true"))
	}, timeout).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(reconciled(g, claim)).To(BeFalse())
		g.Expect(get(g, claim).GetFinalizers()).To(BeEmpty())
	}, quiet).Should(Succeed(), "a paused object gets no side effects, not even the finalizer")

	patch := client.MergeFrom(cluster.DeepCopy())
	cluster.Spec.Paused = ptr.To(false)
	g.Expect(env.Client.Patch(context.Background(), cluster, patch)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(pausedStatus(g, claim)).To(Equal(metav1.ConditionFalse))
		g.Expect(reconciled(g, claim)).To(BeTrue())
		g.Expect(claim.Finalizers).To(ContainElement(finalizer))
	}, timeout).Should(Succeed(), "unpausing the Cluster resumes reconciliation")
}

func TestPausedAnnotationStopsReconcileAndRemovingItResumes(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	startController(t, ns, setup{})
	newCluster(t, ns, "c1", false)
	claim := newClaim(t, ns, "claim", map[string]string{clusterv1.ClusterNameLabel: "c1"},
		map[string]string{clusterv1.PausedAnnotation: ""})

	g.Eventually(func(g Gomega) {
		g.Expect(pausedStatus(g, claim)).To(Equal(metav1.ConditionTrue))
		g.Expect(conditions.Get(claim, clusterv1.PausedCondition).Message).To(ContainSubstring("has the cluster.x-k8s.io/paused annotation"))
	}, timeout).Should(Succeed())
	g.Consistently(func(g Gomega) { g.Expect(reconciled(g, claim)).To(BeFalse()) }, quiet).Should(Succeed())

	patch := client.MergeFrom(claim.DeepCopy())
	delete(claim.Annotations, clusterv1.PausedAnnotation)
	g.Expect(env.Client.Patch(context.Background(), claim, patch)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(pausedStatus(g, claim)).To(Equal(metav1.ConditionFalse))
		g.Expect(reconciled(g, claim)).To(BeTrue())
	}, timeout).Should(Succeed())
}

func TestWatchFilterIgnoresObjectsWithoutTheLabel(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	startController(t, ns, setup{watchFilter: "mine"})
	newCluster(t, ns, "c1", false)
	theirs := newClaim(t, ns, "theirs", map[string]string{clusterv1.ClusterNameLabel: "c1"}, nil)
	other := newClaim(t, ns, "other", map[string]string{clusterv1.ClusterNameLabel: "c1", clusterv1.WatchLabel: "someone-else"}, nil)
	mine := newClaim(t, ns, "mine", map[string]string{clusterv1.ClusterNameLabel: "c1", clusterv1.WatchLabel: "mine"}, nil)

	g.Eventually(func(g Gomega) { g.Expect(reconciled(g, mine)).To(BeTrue()) }, timeout).Should(Succeed())
	g.Consistently(func(g Gomega) {
		for _, c := range []*ipamv1.IPAddressClaim{theirs, other} {
			g.Expect(reconciled(g, c)).To(BeFalse())
			g.Expect(c.Finalizers).To(BeEmpty())
			g.Expect(c.Status.Conditions).To(BeEmpty())
		}
	}, quiet).Should(Succeed())
}

func TestRequireClusterWaitsWithoutFinalizerUntilTheClusterExists(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	startController(t, ns, setup{requireCluster: true})
	claim := newClaim(t, ns, "claim", map[string]string{clusterv1.ClusterNameLabel: "late"}, nil)

	g.Consistently(func(g Gomega) {
		g.Expect(get(g, claim).GetFinalizers()).To(BeEmpty())
		g.Expect(reconciled(g, claim)).To(BeFalse())
	}, quiet).Should(Succeed(), "no finalizer before the Cluster exists")

	// A new Cluster is not an event the controller watches (only pause
	// transitions are), and nothing touches the claim: the claim looks
	// again by itself, as an infrastructure cluster whose Cluster was not
	// yet in the cache must.
	newCluster(t, ns, "late", false)
	g.Eventually(func(g Gomega) {
		g.Expect(get(g, claim).GetFinalizers()).To(ContainElement(finalizer))
		g.Expect(reconciled(g, claim)).To(BeTrue())
	}, timeout).Should(Succeed())
}

func TestNewRejectsMissingDependencies(t *testing.T) {
	g := NewWithT(t)
	_, err := scaffold.New(scaffold.Options[*ipamv1.IPAddressClaim]{})
	g.Expect(err).To(MatchError(ContainSubstring("Client, NewObject and Phases are required")))
}
