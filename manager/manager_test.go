package manager_test

import (
	"bufio"
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/capi-monolith/capi-monolith/manager"
	"github.com/capi-monolith/capi-monolith/modules"
	"github.com/capi-monolith/capi-monolith/test/managertest"
)

const (
	moduleLabel = "test.capi-monolith.dev/module"
	timeout     = 20 * time.Second
)

// recorder counts, per module name, what the manager asked of the modules.
type recorder struct {
	mu      sync.Mutex
	schemes map[string]int
	setups  map[string]int
	opts    map[string]modules.Options
}

func newRecorder() *recorder {
	return &recorder{schemes: map[string]int{}, setups: map[string]int{}, opts: map[string]modules.Options{}}
}

// configMapModule is a module whose one controller marks the ConfigMaps
// labelled with its name: what it registers is visible from outside.
type configMapModule struct {
	name string
	rec  *recorder
}

func (m configMapModule) Name() string { return m.name }

func (m configMapModule) AddToScheme(*runtime.Scheme) error {
	m.rec.mu.Lock()
	defer m.rec.mu.Unlock()
	m.rec.schemes[m.name]++
	return nil
}

func (m configMapModule) SetupWithManager(_ context.Context, shared modules.Shared) error {
	mgr, opts := shared.Manager, shared.Options
	m.rec.mu.Lock()
	m.rec.setups[m.name]++
	m.rec.opts[m.name] = opts
	m.rec.mu.Unlock()
	c := mgr.GetClient()
	return ctrl.NewControllerManagedBy(mgr).
		Named(m.name+"-configmaps").
		For(&corev1.ConfigMap{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetLabels()[moduleLabel] == m.name
		}))).
		Complete(reconcileFunc(func(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
			cm := &corev1.ConfigMap{}
			if err := c.Get(ctx, req.NamespacedName, cm); err != nil {
				return ctrl.Result{}, client.IgnoreNotFound(err)
			}
			patch := client.MergeFrom(cm.DeepCopy())
			if cm.Annotations == nil {
				cm.Annotations = map[string]string{}
			}
			cm.Annotations["reconciled-by"] = m.name
			return ctrl.Result{}, c.Patch(ctx, cm, patch)
		}))
}

type reconcileFunc func(context.Context, ctrl.Request) (ctrl.Result, error)

func (f reconcileFunc) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return f(ctx, req)
}

var moduleNames = []string{"infra", "machinepool", "ipam", "runtimeext"}

func testRegistry(t *testing.T, rec *recorder) *modules.Registry {
	t.Helper()
	var entries []modules.Entry
	for _, n := range moduleNames {
		entries = append(entries, modules.Entry{Name: n, BindFlags: func(*pflag.FlagSet) func() modules.Module {
			return func() modules.Module { return configMapModule{name: n, rec: rec} }
		}})
	}
	reg, err := modules.NewRegistry(entries...)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return reg
}

// fromFlags parses args as the binary does (after every listener off, so
// that many managers can run one after another in one process) and returns
// the manager's options and the enabled modules.
func fromFlags(t *testing.T, reg *modules.Registry, args ...string) (manager.Options, []modules.Module) {
	t.Helper()
	g := NewWithT(t)
	var opts manager.Options
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	manager.BindFlags(fs, &opts, reg.Names())
	bound := reg.BindFlags(fs)
	base := []string{"--health-addr=0", "--diagnostics-address=0", "--insecure-diagnostics", "--webhook-port=0"}
	g.Expect(fs.Parse(append(base, args...))).To(Succeed())
	opts.SkipControllerNameValidation = true
	mods, err := bound.Modules(opts.EnableModules)
	g.Expect(err).NotTo(HaveOccurred())
	return opts, mods
}

func start(t *testing.T, mgr ctrl.Manager) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		NewWithT(t).Expect(<-done).To(Succeed())
	})
}

// combinations returns every non-empty subset of names, in a stable order.
func combinations(names []string) [][]string {
	var out [][]string
	for mask := 1; mask < 1<<len(names); mask++ {
		var c []string
		for i, n := range names {
			if mask&(1<<i) != 0 {
				c = append(c, n)
			}
		}
		out = append(out, c)
	}
	return out
}

func TestEachCombinationOfModulesRunsExactlyTheEnabledControllers(t *testing.T) {
	for _, enabled := range combinations(moduleNames) {
		t.Run(strings.Join(enabled, ","), func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			rec := newRecorder()
			reg := testRegistry(t, rec)
			ns, err := env.CreateNamespace(ctx, "modules")
			g.Expect(err).NotTo(HaveOccurred())

			opts, mods := fromFlags(t, reg, "--enable-modules="+strings.Join(enabled, ","), "--namespace="+ns.Name, "--ipam-concurrency=3")
			mgr, err := manager.New(ctx, env.Config, opts, mods...)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(namesOf(mgr.Modules)).To(Equal(enabled))
			start(t, mgr)

			for _, n := range moduleNames {
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: n, Labels: map[string]string{moduleLabel: n}}}
				g.Expect(env.Client.Create(ctx, cm)).To(Succeed())
			}
			for _, n := range enabled {
				g.Eventually(func() string { return reconciledBy(g, ns.Name, n) }, timeout).Should(Equal(n))
			}
			rec.mu.Lock()
			defer rec.mu.Unlock()
			for _, n := range moduleNames {
				isEnabled := contains(enabled, n)
				want := map[bool]int{true: 1, false: 0}[isEnabled]
				g.Expect(rec.setups[n]).To(Equal(want), "SetupWithManager of %s", n)
				g.Expect(rec.schemes[n]).To(Equal(want), "AddToScheme of %s", n)
				if !isEnabled {
					// Its controller would have marked the object as fast as the others did.
					g.Expect(reconciledBy(g, ns.Name, n)).To(BeEmpty(), "no controller of disabled module %s runs", n)
				}
			}
			if contains(enabled, "ipam") {
				g.Expect(rec.opts["ipam"].Concurrency).To(Equal(3))
				g.Expect(rec.opts["ipam"].WatchNamespace).To(Equal(ns.Name))
				g.Expect(rec.opts["ipam"].WebhooksEnabled).To(BeFalse())
			}
		})
	}
}

// Four modules reconciling ConfigMaps cost the apiserver one watch, not four.
func TestModulesShareOneInformerPerType(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	reg := testRegistry(t, newRecorder())
	ns, err := env.CreateNamespace(ctx, "shared")
	g.Expect(err).NotTo(HaveOccurred())

	before := configMapWatches(g)
	opts, mods := fromFlags(t, reg, "--namespace="+ns.Name)
	mgr, err := manager.New(ctx, env.Config, opts, mods...)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(mgr.Modules).To(HaveLen(4))
	start(t, mgr)
	for _, n := range moduleNames {
		g.Expect(env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: n, Labels: map[string]string{moduleLabel: n}}})).To(Succeed())
	}
	for _, n := range moduleNames {
		g.Eventually(func() string { return reconciledBy(g, ns.Name, n) }, timeout).Should(Equal(n))
	}
	g.Eventually(func() int { return configMapWatches(g) - before }, timeout).Should(Equal(1))
	// The process counts the same watch on its side, for its metrics endpoint.
	g.Eventually(func() float64 { return openWatches(g, "configmaps") }, timeout).Should(Equal(1.0))
}

// openWatches reads capi_monolith_api_watches_open for one resource from the
// registry the diagnostics endpoint serves.
func openWatches(g Gomega, resource string) float64 {
	families, err := ctrlmetrics.Registry.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	for _, f := range families {
		if f.GetName() != "capi_monolith_api_watches_open" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "resource" && l.GetValue() == resource {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return 0
}

func TestBuiltinModulesSetUpInEveryCombination(t *testing.T) {
	byName := map[string]modules.Module{}
	var names []string
	for _, m := range managertest.All() {
		byName[m.Name()] = m
		names = append(names, m.Name())
	}
	for _, enabled := range combinations(names) {
		t.Run(strings.Join(enabled, ","), func(t *testing.T) {
			g := NewWithT(t)
			var mods []modules.Module
			for _, n := range enabled {
				mods = append(mods, byName[n])
			}
			mgr, err := manager.New(context.Background(), env.Config, managertest.Options(names...), mods...)
			if slices.Contains(enabled, "machinepool") && !slices.Contains(enabled, "infra") {
				g.Expect(err).To(MatchError(ContainSubstring(`module "machinepool" requires module "infra"`)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(namesOf(mgr.Modules)).To(Equal(enabled))
		})
	}
}

func TestModulesAreSetUpInTheGivenOrderAndNeedWhatTheyUseSetUpBefore(t *testing.T) {
	g := NewWithT(t)
	infraModule := managertest.Infra()
	mgr, err := manager.New(context.Background(), env.Config, managertest.Options(), managertest.IPAM(), infraModule, managertest.Machinepool(infraModule))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(namesOf(mgr.Modules)).To(Equal([]string{"ipam", "infra", "machinepool"}))

	infraModule = managertest.Infra()
	_, err = manager.New(context.Background(), env.Config, managertest.Options(), managertest.Machinepool(infraModule), managertest.IPAM(), infraModule)
	g.Expect(err).To(MatchError(ContainSubstring(`module "machinepool" requires module "infra"`)))
}

func TestNewRejectsBadOptionsBeforeConnecting(t *testing.T) {
	g := NewWithT(t)
	opts := managertest.Options()
	opts.SyncPeriod = 0
	_, err := manager.New(context.Background(), env.Config, opts, managertest.IPAM())
	g.Expect(err).To(MatchError(ContainSubstring("--sync-period must be positive")))

	_, err = manager.New(context.Background(), env.Config, managertest.Options())
	g.Expect(err).To(MatchError(ContainSubstring("no module to run")))

	_, err = manager.New(context.Background(), env.Config, managertest.Options(), managertest.IPAM(), managertest.IPAM())
	g.Expect(err).To(MatchError(ContainSubstring(`module "ipam" given twice`)))
}

func TestLeaderElectionIDDiffersPerModuleSet(t *testing.T) {
	g := NewWithT(t)
	g.Expect(manager.DefaultLeaderElectionID([]modules.Module{managertest.Infra(), managertest.Machinepool(managertest.Infra())})).To(Equal("capi-monolith-infra-machinepool"))
	g.Expect(manager.DefaultLeaderElectionID([]modules.Module{managertest.IPAM()})).To(Equal("capi-monolith-ipam"))
}

func reconciledBy(g Gomega, namespace, name string) string {
	cm := &corev1.ConfigMap{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, cm)).To(Succeed())
	return cm.Annotations["reconciled-by"]
}

// configMapWatches reads how many WATCH requests on configmaps the apiserver
// is serving now, from its own metrics.
func configMapWatches(g Gomega) int {
	cs, err := kubernetes.NewForConfig(env.Config)
	g.Expect(err).NotTo(HaveOccurred())
	raw, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	g.Expect(err).NotTo(HaveOccurred())
	total := 0
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "apiserver_longrunning_requests{") ||
			!strings.Contains(line, `resource="configmaps"`) || !strings.Contains(line, `verb="WATCH"`) {
			continue
		}
		fields := strings.Fields(line)
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		g.Expect(err).NotTo(HaveOccurred(), line)
		total += int(v)
	}
	return total
}

func namesOf(mods []modules.Module) []string {
	var out []string
	for _, m := range mods {
		out = append(out, m.Name())
	}
	return out
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
