package runtimeext_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/spf13/pflag"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"
	"sigs.k8s.io/cluster-api/util/test/builder"

	"github.com/capi-monolith/capi-monolith/dev/certs"
	"github.com/capi-monolith/capi-monolith/dev/ports"
	infrav1 "github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	ipamv1alpha1 "github.com/capi-monolith/capi-monolith/ipam/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/runtimeext"
	rtxapi "github.com/capi-monolith/capi-monolith/runtimeext/api"
	"github.com/capi-monolith/capi-monolith/runtimeext/internal/record"
	"github.com/capi-monolith/capi-monolith/runtimeext/internal/registration"
	"github.com/capi-monolith/capi-monolith/runtimeext/internal/variables"
)

// extensionName is the ExtensionConfig the suite registers.
const extensionName = "monolith-test"

var registerOnce sync.Once

// ourHandlers are the handler names discovery must report, plus the suite's
// two slow ones.
var ourHandlers = []string{
	"after-cluster-upgrade", "after-control-plane-initialized", "after-control-plane-upgrade", "after-workers-upgrade",
	"before-cluster-create", "before-cluster-delete", "before-cluster-upgrade", "before-control-plane-upgrade",
	"before-workers-upgrade", "can-update-machine", "can-update-machine-set", "discover-variables",
	"generate-patches", "generate-upgrade-plan", "slow-fail", "slow-ignore", "update-machine", "validate-topology",
}

// register creates the suite's ExtensionConfig (self-signed CA, URL) once and
// waits until Cluster API core has discovered it.
func register(t *testing.T) *runtimev1.ExtensionConfig {
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	registerOnce.Do(func() {
		ec := &runtimev1.ExtensionConfig{
			ObjectMeta: metav1.ObjectMeta{Name: extensionName},
			Spec: runtimev1.ExtensionConfigSpec{
				ClientConfig: runtimev1.ClientConfig{URL: hooksURL, CABundle: caPEM},
				// Short waits, so that the suite sees holds lift quickly.
				Settings: map[string]string{"retryAfterSeconds": "1"},
			},
		}
		g.Expect(env.Client.Create(ctx, ec)).To(Succeed())
	})
	ec := &runtimev1.ExtensionConfig{}
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: extensionName}, ec)).To(Succeed())
		c := meta.FindStatusCondition(ec.Status.Conditions, runtimev1.ExtensionConfigDiscoveredCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue), c.Message)
		g.Expect(ec.Status.Handlers).To(HaveLen(len(ourHandlers)))
	}).WithTimeout(60*time.Second).WithPolling(200*time.Millisecond).Should(Succeed(), "core output:\n%s", core.Output())
	return ec
}

func TestCoreDiscoversEveryHandlerInAStableOrder(t *testing.T) {
	g := NewWithT(t)
	ec := register(t)
	var names []string
	for _, h := range ec.Status.Handlers {
		names = append(names, strings.TrimSuffix(h.Name, "."+extensionName))
		g.Expect(h.TimeoutSeconds).NotTo(BeZero(), h.Name)
		g.Expect(h.FailurePolicy).NotTo(BeEmpty(), h.Name)
	}
	g.Expect(names).To(Equal(ourHandlers))
	for _, h := range ec.Status.Handlers {
		if h.Name == "before-cluster-delete."+extensionName {
			g.Expect(h.RequestHook.Hook).To(Equal("BeforeClusterDelete"))
			g.Expect(h.RequestHook.APIVersion).To(Equal("hooks.runtime.cluster.x-k8s.io/v1alpha1"))
			g.Expect(h.FailurePolicy).To(Equal(runtimev1.FailurePolicyFail))
			g.Expect(h.TimeoutSeconds).To(Equal(int32(5)))
		}
	}
}

func TestOtherModulesAdmissionWebhooksAreServedOnTheSamePort(t *testing.T) {
	g := NewWithT(t)
	ns, err := env.CreateNamespace(t.Context(), "admission")
	g.Expect(err).NotTo(HaveOccurred())
	bad := &ipamv1alpha1.MonolithIPPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "bad"},
		Spec:       ipamv1alpha1.IPPoolSpec{Addresses: []string{"not-an-address"}, Prefix: 24},
	}
	// The ipam module's validating webhook (failurePolicy Fail) is served by
	// the runtime extension server: the apiserver reached it and it refused.
	err = env.Client.Create(t.Context(), bad)
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(ContainSubstring(`admission webhook "validation.monolithippool.ipam.cluster.x-k8s.io" denied the request`))
}

// topologyFixture is a ClusterClass of our infra templates and Cluster API's
// generic control plane and bootstrap templates, patched by our extension.
func topologyFixture(t *testing.T, ns string, withUpgradePlan ...bool) {
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	ct := &infrav1.MonolithClusterTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cluster"}}
	ct.Spec.Template.Spec.Backend.InMemory = &infrav1.InMemoryClusterBackend{}
	mt := &infrav1.MonolithMachineTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "machine"}}
	mt.Spec.Template.Spec.Backend.InMemory = &infrav1.InMemoryMachineBackend{}
	g.Expect(env.Client.Create(ctx, ct)).To(Succeed())
	g.Expect(env.Client.Create(ctx, mt)).To(Succeed())
	for _, gvk := range []string{builder.GenericControlPlaneTemplateKind, builder.GenericBootstrapConfigTemplateKind} {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{}}}}}
		if gvk == builder.GenericControlPlaneTemplateKind {
			u.SetAPIVersion(builder.ControlPlaneGroupVersion.String())
		} else {
			u.SetAPIVersion(builder.BootstrapGroupVersion.String())
		}
		u.SetKind(gvk)
		u.SetNamespace(ns)
		u.SetName("generic")
		g.Expect(env.Client.Create(ctx, u)).To(Succeed())
	}
	ref := func(apiVersion, kind, name string) clusterv1.ClusterClassTemplateReference {
		return clusterv1.ClusterClassTemplateReference{APIVersion: apiVersion, Kind: kind, Name: name}
	}
	cc := &clusterv1.ClusterClass{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "monolith"},
		Spec: clusterv1.ClusterClassSpec{
			Infrastructure: clusterv1.InfrastructureClass{TemplateRef: ref(infrav1.GroupVersion.String(), "MonolithClusterTemplate", "cluster")},
			ControlPlane:   clusterv1.ControlPlaneClass{TemplateRef: ref(builder.ControlPlaneGroupVersion.String(), builder.GenericControlPlaneTemplateKind, "generic")},
			Workers: clusterv1.WorkersClass{MachineDeployments: []clusterv1.MachineDeploymentClass{{
				Class:          "workers",
				Bootstrap:      clusterv1.MachineDeploymentClassBootstrapTemplate{TemplateRef: ref(builder.BootstrapGroupVersion.String(), builder.GenericBootstrapConfigTemplateKind, "generic")},
				Infrastructure: clusterv1.MachineDeploymentClassInfrastructureTemplate{TemplateRef: ref(infrav1.GroupVersion.String(), "MonolithMachineTemplate", "machine")},
			}}},
			Patches: []clusterv1.ClusterClassPatch{{
				Name: "monolith",
				External: &clusterv1.ExternalPatchDefinition{
					GeneratePatchesExtension:   "generate-patches." + extensionName,
					ValidateTopologyExtension:  "validate-topology." + extensionName,
					DiscoverVariablesExtension: "discover-variables." + extensionName,
				},
			}},
		},
	}
	if len(withUpgradePlan) > 0 && withUpgradePlan[0] {
		cc.Spec.Upgrade.External.GenerateUpgradePlanExtension = "generate-upgrade-plan." + extensionName
	}
	g.Expect(env.Client.Create(ctx, cc)).To(Succeed())
	// Core called DiscoverVariables: our variables are the class's.
	g.Eventually(func(g Gomega) {
		got := &clusterv1.ClusterClass{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(cc), got)).To(Succeed())
		var names []string
		for _, v := range got.Status.Variables {
			names = append(names, v.Name)
		}
		g.Expect(names).To(ContainElements(variables.Backend, variables.AddressPools, variables.NodeImage))
		g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
	}).WithTimeout(30*time.Second).WithPolling(200*time.Millisecond).Should(Succeed(), "core output:\n%s", core.Output())
}

func clusterVar(name string, v any) clusterv1.ClusterVariable {
	b, _ := json.Marshal(v)
	return clusterv1.ClusterVariable{Name: name, Value: apiextensionsv1.JSON{Raw: b}}
}

func newCluster(ns, name string, annotations map[string]string, vars ...clusterv1.ClusterVariable) *clusterv1.Cluster {
	return &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: annotations},
		Spec: clusterv1.ClusterSpec{Topology: clusterv1.Topology{
			ClassRef:     clusterv1.ClusterClassRef{Name: "monolith"},
			Version:      "v1.35.0",
			ControlPlane: clusterv1.ControlPlaneTopology{Replicas: ptr.To[int32](1)},
			Workers: clusterv1.WorkersTopology{MachineDeployments: []clusterv1.MachineDeploymentTopology{
				{Class: "workers", Name: "md-0", Replicas: ptr.To[int32](2)},
			}},
			Variables: vars,
		}},
	}
}

func topologyCondition(ctx context.Context, c *clusterv1.Cluster) (*metav1.Condition, error) {
	got := &clusterv1.Cluster{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(c), got); err != nil {
		return nil, err
	}
	return meta.FindStatusCondition(got.Status.Conditions, clusterv1.ClusterTopologyReconciledCondition), nil
}

func monolithCluster(ctx context.Context, c *clusterv1.Cluster) (*infrav1.MonolithCluster, error) {
	got := &clusterv1.Cluster{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(c), got); err != nil {
		return nil, err
	}
	if !got.Spec.InfrastructureRef.IsDefined() {
		return nil, fmt.Errorf("no infrastructureRef yet")
	}
	mc := &infrav1.MonolithCluster{}
	err := env.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: got.Spec.InfrastructureRef.Name}, mc)
	return mc, err
}

func events(ctx context.Context, ns, cluster, reason string) ([]string, error) {
	var list eventsv1.EventList
	if err := env.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	var notes []string
	for _, e := range list.Items {
		if e.Regarding.Kind == "Cluster" && e.Regarding.Name == cluster && e.Reason == reason {
			notes = append(notes, e.Note)
		}
	}
	return notes, nil
}

func TestCoreCallsOurHooksThroughAClusterLifecycle(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	register(t)
	ns, err := env.CreateNamespace(ctx, "lifecycle")
	g.Expect(err).NotTo(HaveOccurred())
	topologyFixture(t, ns.Name)

	// A pool with 2 addresses; the topology needs 3 (1 control plane + 2 workers).
	pool := &ipamv1alpha1.MonolithIPPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "nodes"},
		Spec:       ipamv1alpha1.IPPoolSpec{Addresses: []string{"10.20.0.1-10.20.0.2"}, Prefix: 24},
	}
	g.Expect(env.Client.Create(ctx, pool)).To(Succeed())
	retriesBefore := testutil.ToFloat64(record.Calls.WithLabelValues("BeforeClusterCreate", record.OutcomeRetry))

	cluster := newCluster(ns.Name, "c1", nil,
		clusterVar(variables.Backend, variables.BackendDocker),
		clusterVar(variables.LoadBalancerImage, "capi-monolith/test-haproxy:dev"),
		clusterVar(variables.AddressPools, []variables.PoolRef{{Kind: variables.PoolKind, Name: "nodes"}}),
	)
	g.Expect(env.Client.Create(ctx, cluster)).To(Succeed())

	t.Log("BeforeClusterCreate waits for IP capacity, saying why")
	g.Eventually(func(g Gomega) {
		c, err := topologyCondition(ctx, cluster)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(clusterv1.ClusterTopologyReconciledClusterCreatingReason))
		g.Expect(c.Message).To(ContainSubstring("IP pool MonolithIPPool/nodes has 2 free addresses, the topology needs 3: 1 short"))
	}).WithTimeout(60*time.Second).WithPolling(200*time.Millisecond).Should(Succeed(), "core output:\n%s", core.Output())
	g.Expect(testutil.ToFloat64(record.Calls.WithLabelValues("BeforeClusterCreate", record.OutcomeRetry))).To(BeNumerically(">", retriesBefore))
	g.Eventually(func() ([]string, error) { return events(ctx, ns.Name, cluster.Name, "BeforeClusterCreate") }).
		WithTimeout(10 * time.Second).Should(ContainElement(ContainSubstring("1 short")))
	g.Expect(monolithCluster(ctx, cluster)).Error().To(HaveOccurred(), "nothing is created while the hook blocks")

	t.Log("Capacity arrives: core creates the topology, patched by GeneratePatches")
	// The pool's controller writes its status meanwhile: retry a stale update.
	g.Eventually(func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pool), pool); err != nil {
			return err
		}
		pool.Spec.Addresses = []string{"10.20.0.1-10.20.0.10"}
		return env.Client.Update(ctx, pool)
	}).WithTimeout(10 * time.Second).Should(Succeed())
	g.Eventually(func(g Gomega) {
		mc, err := monolithCluster(ctx, cluster)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(mc.Spec.Backend.InMemory).To(BeNil())
		g.Expect(mc.Spec.Backend.Docker).NotTo(BeNil())
		g.Expect(mc.Spec.Backend.Docker.LoadBalancerImage).To(Equal("capi-monolith/test-haproxy:dev"))
	}).WithTimeout(60*time.Second).WithPolling(200*time.Millisecond).Should(Succeed(), "core output:\n%s", core.Output())
	g.Eventually(func(g Gomega) {
		var list infrav1.MonolithMachineTemplateList
		g.Expect(env.Client.List(ctx, &list, client.InNamespace(ns.Name), client.MatchingLabels{clusterv1.ClusterNameLabel: cluster.Name})).To(Succeed())
		g.Expect(list.Items).NotTo(BeEmpty())
		for _, mt := range list.Items {
			g.Expect(mt.Spec.Template.Spec.Backend.Docker).NotTo(BeNil())
			g.Expect(mt.Spec.Template.Spec.AddressesFromPools).To(HaveExactElements(HaveField("Name", "nodes")))
		}
	}).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
	g.Expect(testutil.ToFloat64(record.Calls.WithLabelValues("GeneratePatches", record.OutcomeSuccess))).To(BeNumerically(">", 0))
	g.Expect(testutil.ToFloat64(record.Calls.WithLabelValues("ValidateTopology", record.OutcomeSuccess))).To(BeNumerically(">", 0))

	t.Log("Deletion is held by the annotation until it is removed")
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(cluster), cluster)).To(Succeed())
	patch := client.MergeFrom(cluster.DeepCopy())
	cluster.Annotations = map[string]string{rtxapi.HoldAnnotation: "BeforeClusterDelete"}
	g.Expect(env.Client.Patch(ctx, cluster, patch)).To(Succeed())
	deleteRetries := testutil.ToFloat64(record.Calls.WithLabelValues("BeforeClusterDelete", record.OutcomeRetry))
	g.Expect(env.Client.Delete(ctx, cluster)).To(Succeed())
	g.Eventually(func() float64 {
		return testutil.ToFloat64(record.Calls.WithLabelValues("BeforeClusterDelete", record.OutcomeRetry))
	}).WithTimeout(30*time.Second).Should(BeNumerically(">=", deleteRetries+2), "core keeps asking, and we keep holding")
	g.Eventually(func() ([]string, error) { return events(ctx, ns.Name, cluster.Name, "BeforeClusterDelete") }).
		WithTimeout(10 * time.Second).Should(ContainElement(ContainSubstring("is held by the runtime.capi-monolith.dev/hold annotation")))
	got := &clusterv1.Cluster{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(cluster), got)).To(Succeed(), "the held Cluster still exists")
	g.Expect(got.DeletionTimestamp).NotTo(BeNil())
	_, okToDelete := got.Annotations["runtime.cluster.x-k8s.io/ok-to-delete"]
	g.Expect(okToDelete).To(BeFalse())
	g.Expect(monolithCluster(ctx, cluster)).Error().NotTo(HaveOccurred(), "nothing was deleted while held")

	patch = client.MergeFrom(got.DeepCopy())
	delete(got.Annotations, rtxapi.HoldAnnotation)
	g.Expect(env.Client.Patch(ctx, got, patch)).To(Succeed())
	g.Eventually(func() bool {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(cluster), &clusterv1.Cluster{})
		return apierrors.IsNotFound(err)
	}).WithTimeout(60*time.Second).WithPolling(200*time.Millisecond).Should(BeTrue(), "core output:\n%s", core.Output())
	g.Expect(testutil.ToFloat64(record.Calls.WithLabelValues("BeforeClusterDelete", record.OutcomeSuccess))).To(BeNumerically(">", 0))
}

func TestValidateTopologyRejectionReachesTheClusterCondition(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	register(t)
	ns, err := env.CreateNamespace(ctx, "validate")
	g.Expect(err).NotTo(HaveOccurred())
	topologyFixture(t, ns.Name)
	cluster := newCluster(ns.Name, "inconsistent", nil,
		clusterVar(variables.Backend, variables.BackendInMemory),
		clusterVar(variables.NodeImage, "kindest/node:v1.35.0"),
	)
	g.Expect(env.Client.Create(ctx, cluster)).To(Succeed())
	g.Eventually(func(g Gomega) {
		c, err := topologyCondition(ctx, cluster)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Message).To(ContainSubstring("monolithNodeImage is set but monolithBackend is inmemory: node images apply to the docker backend only"))
	}).WithTimeout(30*time.Second).WithPolling(200*time.Millisecond).Should(Succeed(), "core output:\n%s", core.Output())
	g.Expect(monolithCluster(ctx, cluster)).Error().To(HaveOccurred(), "an invalid topology is not created")
}

func TestAHandlerTimeoutFollowsItsFailurePolicy(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	register(t)
	ns, err := env.CreateNamespace(ctx, "timeout")
	g.Expect(err).NotTo(HaveOccurred())
	topologyFixture(t, ns.Name)

	ignored := newCluster(ns.Name, "ignored", map[string]string{slowAnnotation: "ignore"})
	failed := newCluster(ns.Name, "failed", map[string]string{slowAnnotation: "fail"})
	g.Expect(env.Client.Create(ctx, ignored)).To(Succeed())
	g.Expect(env.Client.Create(ctx, failed)).To(Succeed())

	// failurePolicy Ignore: the timed-out call counts as success.
	g.Eventually(func() error { _, err := monolithCluster(ctx, ignored); return err }).
		WithTimeout(60*time.Second).WithPolling(200*time.Millisecond).Should(Succeed(), "core output:\n%s", core.Output())
	// failurePolicy Fail: the topology is not created, and the condition says why.
	g.Eventually(func(g Gomega) {
		c, err := topologyCondition(ctx, failed)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Message).To(ContainSubstring("slow-fail." + extensionName))
	}).WithTimeout(30*time.Second).WithPolling(200*time.Millisecond).Should(Succeed(), "core output:\n%s", core.Output())
	g.Expect(monolithCluster(ctx, failed)).Error().To(HaveOccurred())
}

func TestRegistrationCreatesAMissingExtensionConfigAndNeverChangesIt(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	opts := registration.Options{
		Name: "monolith-registration", Namespace: "capi-monolith-system",
		ServiceName: registration.DefaultServiceName, ServicePort: registration.DefaultServicePort,
		CASecret: registration.DefaultCASecret, NamespaceSelector: registration.DefaultNamespaceSelector,
	}
	g.Expect(opts.Validate()).To(Succeed())
	r := &registration.Registrar{Client: env.Client, Options: opts}
	// Core's ExtensionConfig webhooks are live: they admit it.
	g.Expect(r.Ensure(ctx)).To(Succeed())
	g.Expect(r.Ensure(ctx)).To(Succeed(), "ensuring again is a no-op")

	ec := &runtimev1.ExtensionConfig{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: opts.Name}, ec)).To(Succeed())
	g.Expect(ec.Annotations).To(HaveKeyWithValue("runtime.cluster.x-k8s.io/inject-ca-from-secret", "capi-monolith-system/capi-monolith-webhook-service-cert"))
	g.Expect(ec.Spec.ClientConfig.Service.Namespace).To(Equal("capi-monolith-system"))
	g.Expect(ec.Spec.ClientConfig.Service.Name).To(Equal("capi-monolith-webhook-service"))
	g.Expect(ec.Spec.ClientConfig.Service.Port).To(Equal(ptr.To[int32](443)))
	// By default only namespaces that opt in are selected.
	g.Expect(ec.Spec.NamespaceSelector.MatchLabels).To(Equal(map[string]string{rtxapi.NamespaceOptInLabel: "true"}))
	g.Expect(ec.Spec.NamespaceSelector.MatchExpressions).To(BeEmpty())

	// Everything an admin changes survives the next start: the registrar
	// never patches an existing ExtensionConfig.
	patch := client.MergeFrom(ec.DeepCopy())
	ec.Spec.Settings = map[string]string{"retryAfterSeconds": "5"}
	ec.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "b"}}
	ec.Spec.ClientConfig.Service.Port = ptr.To[int32](8443)
	g.Expect(env.Client.Patch(ctx, ec, patch)).To(Succeed())
	edited := ec.Spec.DeepCopy()
	g.Expect(r.Ensure(ctx)).To(Succeed())
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: opts.Name}, ec)).To(Succeed())
	g.Expect(ec.Spec.Settings).To(Equal(edited.Settings))
	g.Expect(ec.Spec.NamespaceSelector).To(Equal(edited.NamespaceSelector))
	g.Expect(ec.Spec.ClientConfig.Service.Port).To(Equal(ptr.To[int32](8443)))

	// Start retries until it can apply, and returns once it has.
	opts.Name = "monolith-registration-2"
	done := make(chan error, 1)
	go func() {
		done <- (&registration.Registrar{Client: env.Client, Options: opts}).Start(ctx)
	}()
	g.Eventually(done).WithTimeout(30 * time.Second).Should(Receive(BeNil()))
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: opts.Name}, ec)).To(Succeed())
	g.Expect(env.Client.Delete(ctx, ec)).To(Succeed())
	ec = &runtimev1.ExtensionConfig{ObjectMeta: metav1.ObjectMeta{Name: "monolith-registration"}}
	g.Expect(env.Client.Delete(ctx, ec)).To(Succeed())
}

// With an owner, the created ExtensionConfig is owned by that ClusterRole and
// carries its clusterctl labels (the garbage collector removes it with the
// role, which clusterctl delete removes); one owned by an earlier role of
// that name is replaced; one the admin made (no such owner) is left alone.
func TestRegistrationWithAnOwnerFollowsItsClusterRole(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	newRole := func() *rbacv1.ClusterRole {
		role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "monolith-owner-test", Labels: map[string]string{
			"clusterctl.cluster.x-k8s.io": "", "cluster.x-k8s.io/provider": "runtime-extension-monolith", "other": "x",
		}}}
		g.Expect(env.Client.Create(ctx, role)).To(Succeed())
		return role
	}
	role := newRole()
	opts := registration.Options{
		Name: "monolith-owned", Namespace: "capi-monolith-system", Owner: role.Name,
		ServiceName: registration.DefaultServiceName, ServicePort: registration.DefaultServicePort,
		CASecret: registration.DefaultCASecret, NamespaceSelector: registration.DefaultNamespaceSelector,
	}
	g.Expect(opts.Validate()).To(Succeed())
	r := &registration.Registrar{Client: env.Client, Options: opts}
	g.Expect(r.Ensure(ctx)).To(Succeed())
	ec := &runtimev1.ExtensionConfig{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: opts.Name}, ec)).To(Succeed())
	first := ec.UID
	g.Expect(ec.OwnerReferences).To(ConsistOf(metav1.OwnerReference{
		APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: role.Name, UID: role.UID,
	}))
	g.Expect(ec.Labels).To(HaveKeyWithValue("clusterctl.cluster.x-k8s.io", ""))
	g.Expect(ec.Labels).To(HaveKeyWithValue("cluster.x-k8s.io/provider", "runtime-extension-monolith"))
	g.Expect(ec.Labels).NotTo(HaveKey("other"))
	g.Expect(r.Ensure(ctx)).To(Succeed())
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: opts.Name}, ec)).To(Succeed())
	g.Expect(ec.UID).To(Equal(first), "the same owner: left as it is")

	// A reinstall (or clusterctl upgrade) made the role again: the
	// ExtensionConfig of the earlier one is replaced, owned by the new one.
	g.Expect(env.Client.Delete(ctx, role)).To(Succeed())
	role = newRole()
	g.Expect(r.Ensure(ctx)).To(Succeed())
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: opts.Name}, ec)).To(Succeed())
	g.Expect(ec.UID).NotTo(Equal(first))
	g.Expect(ec.OwnerReferences).To(ConsistOf(HaveField("UID", role.UID)))

	// One without that owner is the admin's: never changed.
	g.Expect(env.Client.Delete(ctx, ec)).To(Succeed())
	admins, err := opts.ExtensionConfig()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env.Client.Create(ctx, admins)).To(Succeed())
	g.Expect(r.Ensure(ctx)).To(Succeed())
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: opts.Name}, ec)).To(Succeed())
	g.Expect(ec.UID).To(Equal(admins.UID))
	g.Expect(ec.OwnerReferences).To(BeEmpty())

	// Without its owner, registration fails (and Start retries).
	g.Expect(env.Client.Delete(ctx, ec)).To(Succeed())
	g.Expect(env.Client.Delete(ctx, role)).To(Succeed())
	g.Expect(r.Ensure(ctx)).To(MatchError(ContainSubstring("failed to read ClusterRole monolith-owner-test")))
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: opts.Name}, ec)).To(Satisfy(apierrors.IsNotFound))
}

// Registration is the admin's: the module creates nothing unless told to,
// and a self-registered ExtensionConfig selects only namespaces that opt in.
func TestSelfRegistrationIsOptIn(t *testing.T) {
	g := NewWithT(t)
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	opts := runtimeext.DefaultOptions()
	opts.BindFlags(fs)
	g.Expect(opts.SelfRegister).To(BeFalse())
	g.Expect(fs.Lookup("runtimeext-self-register").DefValue).To(Equal("false"))
	g.Expect(fs.Lookup("runtimeext-namespace-selector").DefValue).To(Equal("runtime.capi-monolith.dev/enabled=true"))
}

func TestRegistrationOptionsAreValidatedNamingTheFlag(t *testing.T) {
	g := NewWithT(t)
	err := registration.Options{Name: "Bad_Name", ServiceName: "svc", ServicePort: 0, CASecret: "s", NamespaceSelector: "a in ("}.Validate()
	g.Expect(err).To(MatchError(ContainSubstring("--runtimeext-extension-config-name")))
	g.Expect(err).To(MatchError(ContainSubstring("--runtimeext-service-port must be between 1 and 65535, got 0")))
	g.Expect(err).To(MatchError(ContainSubstring("--runtimeext-namespace-selector")))
	g.Expect(registration.Options{}.Validate()).To(Succeed(), "registration turned off")
}

func TestTheModuleRegistersItselfFromItsNamespaceAndFlags(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	t.Setenv("POD_NAMESPACE", "capi-monolith-system")
	port, err := ports.One()
	g.Expect(err).NotTo(HaveOccurred())
	opts := runtimeext.DefaultOptions()
	opts.SelfRegister = true
	opts.Registration.Name = "monolith-self"
	opts.Registration.ServiceName = "prefix-capi-monolith-webhook-service"
	opts.Registration.ServicePort = 8443
	opts.Registration.CASecret = "prefix-capi-monolith-webhook-service-cert"
	opts.Registration.NamespaceSelector = "team=a"
	stop, err := startManagerWith(port, env.WebhookInstallOptions.LocalServingCertDir, nil, runtimeext.New(opts))
	g.Expect(err).NotTo(HaveOccurred())
	ec := &runtimev1.ExtensionConfig{}
	g.Eventually(func() error {
		return env.Client.Get(ctx, client.ObjectKey{Name: "monolith-self"}, ec)
	}).WithTimeout(30 * time.Second).Should(Succeed())
	stop()

	g.Expect(ec.Annotations).To(HaveKeyWithValue("runtime.cluster.x-k8s.io/inject-ca-from-secret", "capi-monolith-system/prefix-capi-monolith-webhook-service-cert"))
	g.Expect(ec.Spec.ClientConfig.Service).To(Equal(runtimev1.ServiceReference{Namespace: "capi-monolith-system", Name: "prefix-capi-monolith-webhook-service", Port: ptr.To[int32](8443)}))
	g.Expect(ec.Spec.NamespaceSelector.MatchLabels).To(Equal(map[string]string{"team": "a"}))
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: "monolith-self"}, ec)).To(Succeed(), "stopping the manager leaves the ExtensionConfig in place")
	g.Expect(env.Client.Delete(ctx, ec)).To(Succeed())
}

func TestCoreAsksOurUpgradePlanWhenTheVersionJumpsMinors(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	register(t)
	ns, err := env.CreateNamespace(ctx, "upgrade")
	g.Expect(err).NotTo(HaveOccurred())
	topologyFixture(t, ns.Name, true)
	cluster := newCluster(ns.Name, "upgrading", nil)
	cluster.Spec.Topology.Version = "v1.33.0"
	g.Expect(env.Client.Create(ctx, cluster)).To(Succeed())
	g.Eventually(func() error { _, err := monolithCluster(ctx, cluster); return err }).
		WithTimeout(60*time.Second).WithPolling(200*time.Millisecond).Should(Succeed(), "core output:\n%s", core.Output())

	// No controller runs the generic control plane: report it provisioned
	// at v1.33.0, as a control plane provider would.
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(cluster), cluster)).To(Succeed())
	cp := &unstructured.Unstructured{}
	cp.SetAPIVersion(builder.ControlPlaneGroupVersion.String())
	cp.SetKind(builder.GenericControlPlaneKind)
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: cluster.Spec.ControlPlaneRef.Name}, cp)).To(Succeed())
	g.Expect(unstructured.SetNestedField(cp.Object, "v1.33.0", "status", "version")).To(Succeed())
	g.Expect(env.Client.Status().Update(ctx, cp)).To(Succeed())

	t.Log("A jump over a minor nobody lists: core reports our Failure")
	g.Eventually(func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cluster), cluster); err != nil {
			return err
		}
		patch := client.MergeFrom(cluster.DeepCopy())
		cluster.Spec.Topology.Version = "v1.35.0"
		// Core's webhook reads the control plane's status through its cache.
		return env.Client.Patch(ctx, cluster, patch)
	}).WithTimeout(10 * time.Second).Should(Succeed())
	g.Eventually(func(g Gomega) {
		c, err := topologyCondition(ctx, cluster)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Message).To(ContainSubstring("no version of Kubernetes 1.34 is known to upgrade through"))
	}).WithTimeout(30*time.Second).WithPolling(200*time.Millisecond).Should(Succeed(), "core output:\n%s", core.Output())
	g.Eventually(func() ([]string, error) { return events(ctx, ns.Name, cluster.Name, "GenerateUpgradePlan") }).
		WithTimeout(10 * time.Second).Should(ContainElement(ContainSubstring("no version of Kubernetes 1.34")))

	t.Log("Listing v1.34.2 in the variable, with BeforeClusterUpgrade held: core accepts our plan and waits")
	successes := testutil.ToFloat64(record.Calls.WithLabelValues("GenerateUpgradePlan", record.OutcomeSuccess))
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(cluster), cluster)).To(Succeed())
	patch := client.MergeFrom(cluster.DeepCopy())
	cluster.Annotations = map[string]string{rtxapi.HoldAnnotation: "BeforeClusterUpgrade"}
	cluster.Spec.Topology.Variables = append(cluster.Spec.Topology.Variables, clusterVar(variables.UpgradeVersions, []string{"v1.34.2"}))
	g.Expect(env.Client.Patch(ctx, cluster, patch)).To(Succeed())
	g.Eventually(func() float64 {
		return testutil.ToFloat64(record.Calls.WithLabelValues("GenerateUpgradePlan", record.OutcomeSuccess))
	}).WithTimeout(30 * time.Second).Should(BeNumerically(">", successes))
	g.Eventually(func() ([]string, error) { return events(ctx, ns.Name, cluster.Name, "BeforeClusterUpgrade") }).
		WithTimeout(30*time.Second).Should(ContainElement(ContainSubstring("BeforeClusterUpgrade is held by the runtime.capi-monolith.dev/hold annotation")), "core output:\n%s", core.Output())
	cpVersion := func() (string, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cp), cp); err != nil {
			return "", err
		}
		v, _, err := unstructured.NestedString(cp.Object, "spec", "version")
		return v, err
	}
	g.Expect(cpVersion()).To(Equal("v1.33.0"), "the control plane waits while the upgrade is held")

	t.Log("Lifting the hold: the control plane moves to the first step of our plan")
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(cluster), cluster)).To(Succeed())
	patch = client.MergeFrom(cluster.DeepCopy())
	delete(cluster.Annotations, rtxapi.HoldAnnotation)
	g.Expect(env.Client.Patch(ctx, cluster, patch)).To(Succeed())
	g.Eventually(cpVersion).WithTimeout(30*time.Second).WithPolling(200*time.Millisecond).Should(Equal("v1.34.2"), "core output:\n%s", core.Output())
	g.Eventually(func() ([]string, error) { return events(ctx, ns.Name, cluster.Name, "BeforeControlPlaneUpgrade") }).
		WithTimeout(10*time.Second).ShouldNot(BeEmpty(), "core asked before upgrading the control plane")
}

func TestCoreWithoutAClientCertificateIsRejectedWhenMTLSIsOn(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	clientCA, err := certs.NewCA("runtimeext-clients")
	g.Expect(err).NotTo(HaveOccurred())
	caFile := filepath.Join(t.TempDir(), "client-ca.crt")
	g.Expect(os.WriteFile(caFile, clientCA.PEM, 0o600)).To(Succeed())
	port, err := ports.One()
	g.Expect(err).NotTo(HaveOccurred())
	opts := runtimeext.DefaultOptions()
	opts.Registration.Name = ""
	opts.ClientCAFile = caFile
	stop, err := startManagerWith(port, env.WebhookInstallOptions.LocalServingCertDir, nil, runtimeext.New(opts))
	g.Expect(err).NotTo(HaveOccurred())
	defer stop()

	// The suite's core runs without --runtime-extension-client-cert-file.
	ec := &runtimev1.ExtensionConfig{
		ObjectMeta: metav1.ObjectMeta{Name: "mtls-test"},
		Spec: runtimev1.ExtensionConfigSpec{ClientConfig: runtimev1.ClientConfig{
			URL: fmt.Sprintf("https://127.0.0.1:%d", port), CABundle: caPEM,
		}},
	}
	g.Expect(env.Client.Create(ctx, ec)).To(Succeed())
	defer func() { g.Expect(env.Client.Delete(context.Background(), ec)).To(Succeed()) }()
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(ec), ec)).To(Succeed())
		c := meta.FindStatusCondition(ec.Status.Conditions, runtimev1.ExtensionConfigDiscoveredCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Message).To(ContainSubstring("status code 403"), "refused by the guard, not by TLS")
		g.Expect(ec.Status.Handlers).To(BeEmpty())
	}).WithTimeout(30*time.Second).WithPolling(200*time.Millisecond).Should(Succeed(), "core output:\n%s", core.Output())
}
