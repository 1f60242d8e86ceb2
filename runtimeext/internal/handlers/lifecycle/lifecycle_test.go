package lifecycle_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"

	ipamv1alpha1 "github.com/capi-monolith/capi-monolith/ipam/api/v1alpha1"
	rtxapi "github.com/capi-monolith/capi-monolith/runtimeext/api"
	"github.com/capi-monolith/capi-monolith/runtimeext/internal/handlers/lifecycle"
	"github.com/capi-monolith/capi-monolith/runtimeext/internal/record"
	"github.com/capi-monolith/capi-monolith/runtimeext/internal/scope"
	"github.com/capi-monolith/capi-monolith/runtimeext/internal/variables"
)

func cluster(annotations map[string]string, vars ...clusterv1.ClusterVariable) clusterv1.Cluster {
	return clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", Annotations: annotations},
		Spec: clusterv1.ClusterSpec{Topology: clusterv1.Topology{
			ClassRef:     clusterv1.ClusterClassRef{Name: "class"},
			Version:      "v1.35.0",
			ControlPlane: clusterv1.ControlPlaneTopology{Replicas: ptr.To[int32](1)},
			Workers: clusterv1.WorkersTopology{MachineDeployments: []clusterv1.MachineDeploymentTopology{
				{Class: "md", Name: "md-0", Replicas: ptr.To[int32](3)},
				{Class: "md", Name: "md-1", Replicas: ptr.To[int32](2), Variables: clusterv1.MachineDeploymentVariables{Overrides: []clusterv1.ClusterVariable{
					variable(variables.AddressPools, []variables.PoolRef{{Kind: variables.GlobalPoolKind, Name: "global"}}),
				}}},
			}},
			Variables: vars,
		}},
	}
}

func variable(name string, v any) clusterv1.ClusterVariable {
	b, _ := json.Marshal(v)
	return clusterv1.ClusterVariable{Name: name, Value: apiextensionsv1.JSON{Raw: b}}
}

func pool(name string, free int64) *ipamv1alpha1.MonolithIPPool {
	return &ipamv1alpha1.MonolithIPPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Status:     ipamv1alpha1.IPPoolStatus{IPAddresses: &ipamv1alpha1.IPAddressesStatus{Free: free}},
	}
}

func globalPool(name string, free int64) *ipamv1alpha1.GlobalMonolithIPPool {
	return &ipamv1alpha1.GlobalMonolithIPPool{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status:     ipamv1alpha1.IPPoolStatus{IPAddresses: &ipamv1alpha1.IPAddressesStatus{Free: free}},
	}
}

func newHandlers(t *testing.T, objs ...runtime.Object) (*lifecycle.Handlers, *events.FakeRecorder) {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := ipamv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	rec := events.NewFakeRecorder(10)
	return &lifecycle.Handlers{
		Reader:   fake.NewClientBuilder().WithScheme(scheme).WithRuntimeObjects(objs...).Build(),
		Recorder: &record.Recorder{Events: rec},
	}, rec
}

func TestHold(t *testing.T) {
	tests := []struct {
		name       string
		annotation string
		settings   map[string]string
		wantRetry  int32
	}{
		{name: "a hook listed in the annotation waits the default 30 s", annotation: "BeforeClusterUpgrade, BeforeClusterDelete", wantRetry: 30},
		{name: "the retry interval comes from the settings", annotation: "beforeclusterdelete", settings: map[string]string{"retryAfterSeconds": "2"}, wantRetry: 2},
		{name: "a hook not listed proceeds", annotation: "BeforeClusterUpgrade", wantRetry: 0},
		{name: "an empty annotation holds nothing", annotation: "", wantRetry: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			h, rec := newHandlers(t)
			req := &runtimehooksv1.BeforeClusterDeleteRequest{Cluster: cluster(map[string]string{rtxapi.HoldAnnotation: tt.annotation})}
			req.Settings = tt.settings
			resp := &runtimehooksv1.BeforeClusterDeleteResponse{}
			h.BeforeClusterDelete(context.Background(), req, resp)
			g.Expect(resp.Status).To(Equal(runtimehooksv1.ResponseStatusSuccess))
			g.Expect(resp.RetryAfterSeconds).To(Equal(tt.wantRetry))
			if tt.wantRetry > 0 {
				g.Expect(resp.Message).To(Equal("BeforeClusterDelete is held by the runtime.capi-monolith.dev/hold annotation on the Cluster; remove BeforeClusterDelete from it to proceed"))
			}
			g.Expect(<-rec.Events).To(HavePrefix("Normal BeforeClusterDelete "))
		})
	}
}

func TestEveryBlockingHookCanBeHeld(t *testing.T) {
	g := NewWithT(t)
	h, _ := newHandlers(t)
	c := cluster(map[string]string{rtxapi.HoldAnnotation: "BeforeClusterCreate,BeforeClusterUpgrade,BeforeControlPlaneUpgrade,AfterControlPlaneUpgrade,BeforeWorkersUpgrade,AfterWorkersUpgrade,AfterClusterUpgrade,BeforeClusterDelete"})
	ctx := context.Background()
	retries := map[string]int32{}
	{
		r := &runtimehooksv1.BeforeClusterCreateResponse{}
		h.BeforeClusterCreate(ctx, &runtimehooksv1.BeforeClusterCreateRequest{Cluster: c}, r)
		retries["BeforeClusterCreate"] = r.RetryAfterSeconds
	}
	{
		r := &runtimehooksv1.BeforeClusterUpgradeResponse{}
		h.BeforeClusterUpgrade(ctx, &runtimehooksv1.BeforeClusterUpgradeRequest{Cluster: c}, r)
		retries["BeforeClusterUpgrade"] = r.RetryAfterSeconds
	}
	{
		r := &runtimehooksv1.BeforeControlPlaneUpgradeResponse{}
		h.BeforeControlPlaneUpgrade(ctx, &runtimehooksv1.BeforeControlPlaneUpgradeRequest{Cluster: c}, r)
		retries["BeforeControlPlaneUpgrade"] = r.RetryAfterSeconds
	}
	{
		r := &runtimehooksv1.AfterControlPlaneUpgradeResponse{}
		h.AfterControlPlaneUpgrade(ctx, &runtimehooksv1.AfterControlPlaneUpgradeRequest{Cluster: c}, r)
		retries["AfterControlPlaneUpgrade"] = r.RetryAfterSeconds
	}
	{
		r := &runtimehooksv1.BeforeWorkersUpgradeResponse{}
		h.BeforeWorkersUpgrade(ctx, &runtimehooksv1.BeforeWorkersUpgradeRequest{Cluster: c}, r)
		retries["BeforeWorkersUpgrade"] = r.RetryAfterSeconds
	}
	{
		r := &runtimehooksv1.AfterWorkersUpgradeResponse{}
		h.AfterWorkersUpgrade(ctx, &runtimehooksv1.AfterWorkersUpgradeRequest{Cluster: c}, r)
		retries["AfterWorkersUpgrade"] = r.RetryAfterSeconds
	}
	{
		r := &runtimehooksv1.AfterClusterUpgradeResponse{}
		h.AfterClusterUpgrade(ctx, &runtimehooksv1.AfterClusterUpgradeRequest{Cluster: c}, r)
		retries["AfterClusterUpgrade"] = r.RetryAfterSeconds
	}
	{
		r := &runtimehooksv1.BeforeClusterDeleteResponse{}
		h.BeforeClusterDelete(ctx, &runtimehooksv1.BeforeClusterDeleteRequest{Cluster: c}, r)
		retries["BeforeClusterDelete"] = r.RetryAfterSeconds
	}
	for hook, r := range retries {
		g.Expect(r).To(Equal(int32(30)), hook)
	}
	// The one non-blocking hook answers Success whatever the annotation.
	r := &runtimehooksv1.AfterControlPlaneInitializedResponse{}
	h.AfterControlPlaneInitialized(ctx, &runtimehooksv1.AfterControlPlaneInitializedRequest{Cluster: c}, r)
	g.Expect(r.Status).To(Equal(runtimehooksv1.ResponseStatusSuccess))
}

func TestIPCapacityGate(t *testing.T) {
	pools := variable(variables.AddressPools, []variables.PoolRef{{Kind: variables.PoolKind, Name: "nodes"}})
	tests := []struct {
		name      string
		objs      []runtime.Object
		vars      []clusterv1.ClusterVariable
		settings  map[string]string
		wantRetry bool
		wantMsg   string
	}{
		{
			name: "enough free addresses in every pool proceeds",
			// 1 control plane + 3 workers take from nodes; md-1's 2 from global.
			objs: []runtime.Object{pool("nodes", 4), globalPool("global", 2)},
			vars: []clusterv1.ClusterVariable{pools},
		},
		{
			name:      "a short pool waits, naming the pool and the shortfall",
			objs:      []runtime.Object{pool("nodes", 3), globalPool("global", 2)},
			vars:      []clusterv1.ClusterVariable{pools},
			wantRetry: true,
			wantMsg:   "IP pool MonolithIPPool/nodes has 3 free addresses, the topology needs 4: 1 short",
		},
		{
			name:      "a short global pool waits",
			objs:      []runtime.Object{pool("nodes", 10), globalPool("global", 0)},
			vars:      []clusterv1.ClusterVariable{pools},
			wantRetry: true,
			wantMsg:   "IP pool GlobalMonolithIPPool/global has 0 free addresses, the topology needs 2: 2 short",
		},
		{
			name:      "a missing pool waits",
			objs:      []runtime.Object{globalPool("global", 2)},
			vars:      []clusterv1.ClusterVariable{pools},
			wantRetry: true,
			wantMsg:   "IP pool MonolithIPPool/nodes does not exist; the topology needs 4 addresses from it",
		},
		{
			name:      "a pool without a status yet waits",
			objs:      []runtime.Object{&ipamv1alpha1.MonolithIPPool{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "nodes"}}, globalPool("global", 2)},
			vars:      []clusterv1.ClusterVariable{pools},
			wantRetry: true,
			wantMsg:   "IP pool MonolithIPPool/nodes has not reported its free addresses yet; the topology needs 4",
		},
		{
			name:     "the gate can be turned off in the settings",
			objs:     []runtime.Object{pool("nodes", 0), globalPool("global", 0)},
			vars:     []clusterv1.ClusterVariable{pools},
			settings: map[string]string{"capacityGate": "disabled"},
		},
		{
			name: "without the variable, only md-1's override counts",
			objs: []runtime.Object{globalPool("global", 2)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			h, _ := newHandlers(t, tt.objs...)
			req := &runtimehooksv1.BeforeClusterCreateRequest{Cluster: cluster(nil, tt.vars...)}
			req.Settings = tt.settings
			resp := &runtimehooksv1.BeforeClusterCreateResponse{}
			h.BeforeClusterCreate(context.Background(), req, resp)
			g.Expect(resp.Status).To(Equal(runtimehooksv1.ResponseStatusSuccess), resp.Message)
			if tt.wantRetry {
				g.Expect(resp.RetryAfterSeconds).To(BeNumerically(">", 0))
				g.Expect(resp.Message).To(Equal(tt.wantMsg))
			} else {
				g.Expect(resp.RetryAfterSeconds).To(BeZero(), resp.Message)
			}
		})
	}
}

func TestBadSettingsAndVariablesFailWithAMessageNamingThem(t *testing.T) {
	g := NewWithT(t)
	h, rec := newHandlers(t)
	req := &runtimehooksv1.BeforeClusterCreateRequest{Cluster: cluster(nil)}
	req.Settings = map[string]string{"retryAfterSeconds": "0", "capacityGate": "maybe"}
	resp := &runtimehooksv1.BeforeClusterCreateResponse{}
	h.BeforeClusterCreate(context.Background(), req, resp)
	g.Expect(resp.Status).To(Equal(runtimehooksv1.ResponseStatusFailure))
	g.Expect(resp.Message).To(ContainSubstring(`setting retryAfterSeconds must be a whole number of seconds from 1 to 3600, got "0"`))
	g.Expect(resp.Message).To(ContainSubstring(`setting capacityGate must be enabled or disabled, got "maybe"`))
	g.Expect(<-rec.Events).To(HavePrefix("Warning BeforeClusterCreate"))

	req = &runtimehooksv1.BeforeClusterCreateRequest{Cluster: cluster(nil, variable(variables.AddressPools, "not a list"))}
	resp = &runtimehooksv1.BeforeClusterCreateResponse{}
	h.BeforeClusterCreate(context.Background(), req, resp)
	g.Expect(resp.Status).To(Equal(runtimehooksv1.ResponseStatusFailure))
	g.Expect(resp.Message).To(HavePrefix("failed to read the IP pools of the topology: control plane: variable monolithAddressPools"))
}

func TestEveryCallIsCountedByHookAndOutcome(t *testing.T) {
	g := NewWithT(t)
	h, _ := newHandlers(t)
	before := testutil.ToFloat64(record.Calls.WithLabelValues("BeforeClusterUpgrade", record.OutcomeRetry))
	beforeOK := testutil.ToFloat64(record.Calls.WithLabelValues("BeforeClusterUpgrade", record.OutcomeSuccess))
	held := cluster(map[string]string{rtxapi.HoldAnnotation: "BeforeClusterUpgrade"})
	h.BeforeClusterUpgrade(context.Background(), &runtimehooksv1.BeforeClusterUpgradeRequest{Cluster: held}, &runtimehooksv1.BeforeClusterUpgradeResponse{})
	h.BeforeClusterUpgrade(context.Background(), &runtimehooksv1.BeforeClusterUpgradeRequest{Cluster: cluster(nil)}, &runtimehooksv1.BeforeClusterUpgradeResponse{})
	g.Expect(testutil.ToFloat64(record.Calls.WithLabelValues("BeforeClusterUpgrade", record.OutcomeRetry))).To(Equal(before + 1))
	g.Expect(testutil.ToFloat64(record.Calls.WithLabelValues("BeforeClusterUpgrade", record.OutcomeSuccess))).To(Equal(beforeOK + 1))
	g.Expect(testutil.CollectAndCount(record.Duration)).To(BeNumerically(">=", 1))
}

func TestHeldParsesTheAnnotation(t *testing.T) {
	g := NewWithT(t)
	c := cluster(map[string]string{rtxapi.HoldAnnotation: " BeforeClusterDelete ,, BeforeClusterUpgrade"})
	g.Expect(lifecycle.Held(&c)).To(Equal([]string{"BeforeClusterDelete", "BeforeClusterUpgrade"}))
	g.Expect(strings.Join(lifecycle.Held(&clusterv1.Cluster{}), "")).To(BeEmpty())
}

func TestAPoolThatCannotBeReadFailsWithoutTheUnderlyingError(t *testing.T) {
	g := NewWithT(t)
	scheme := runtime.NewScheme()
	g.Expect(ipamv1alpha1.AddToScheme(scheme)).To(Succeed())
	h := &lifecycle.Handlers{Reader: fake.NewClientBuilder().WithScheme(scheme).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
			return errors.New("no matches for kind MonolithIPPool at 10:42:17.123")
		},
	}).Build()}
	req := &runtimehooksv1.BeforeClusterCreateRequest{Cluster: cluster(nil, variable(variables.AddressPools, []variables.PoolRef{{Kind: variables.PoolKind, Name: "nodes"}}))}
	resp := &runtimehooksv1.BeforeClusterCreateResponse{}
	h.BeforeClusterCreate(context.Background(), req, resp)
	g.Expect(resp.Status).To(Equal(runtimehooksv1.ResponseStatusFailure))
	g.Expect(resp.Message).To(Equal("failed to read IP pool MonolithIPPool/nodes (is the ipam module's CRD installed?); see the extension's logs"))
}

// A Cluster outside --namespace or --watch-filter gets the neutral answer
// (success, nothing held, no capacity wait) and no Event; one inside is
// handled as always.
func TestClustersOutsideTheScopeGetTheNeutralAnswerAndNoEvent(t *testing.T) {
	held := map[string]string{rtxapi.HoldAnnotation: "BeforeClusterCreate,BeforeClusterDelete,AfterControlPlaneInitialized"}
	pools := variable(variables.AddressPools, []variables.PoolRef{{Kind: variables.PoolKind, Name: "nodes"}})
	mine := map[string]string{clusterv1.WatchLabel: "mine"}
	tests := []struct {
		name    string
		scope   scope.Scope
		labels  map[string]string
		inScope bool
	}{
		{name: "another namespace", scope: scope.Scope{Namespace: "other"}},
		{name: "no watch-filter label", scope: scope.Scope{WatchFilterValue: "mine"}},
		{name: "another watch-filter value", scope: scope.Scope{WatchFilterValue: "mine"}, labels: map[string]string{clusterv1.WatchLabel: "theirs"}},
		{name: "in the namespace with the label", scope: scope.Scope{Namespace: "ns", WatchFilterValue: "mine"}, labels: mine, inScope: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			// The pool is short: an in-scope BeforeClusterCreate waits
			// anyway (held first).
			h, rec := newHandlers(t, pool("nodes", 0))
			h.Scope, h.Recorder.Scope = tt.scope, tt.scope
			c := cluster(held, pools)
			c.Labels = tt.labels

			create := &runtimehooksv1.BeforeClusterCreateResponse{}
			h.BeforeClusterCreate(context.Background(), &runtimehooksv1.BeforeClusterCreateRequest{Cluster: c}, create)
			del := &runtimehooksv1.BeforeClusterDeleteResponse{}
			h.BeforeClusterDelete(context.Background(), &runtimehooksv1.BeforeClusterDeleteRequest{Cluster: c}, del)
			after := &runtimehooksv1.AfterControlPlaneInitializedResponse{}
			h.AfterControlPlaneInitialized(context.Background(), &runtimehooksv1.AfterControlPlaneInitializedRequest{Cluster: c}, after)

			for _, resp := range []record.Response{create, del, after} {
				g.Expect(resp.GetStatus()).To(Equal(runtimehooksv1.ResponseStatusSuccess))
			}
			if tt.inScope {
				g.Expect(create.RetryAfterSeconds).To(BeNumerically(">", 0))
				g.Expect(del.RetryAfterSeconds).To(BeNumerically(">", 0))
				g.Expect(rec.Events).To(HaveLen(3), "one Event per call")
				return
			}
			g.Expect(create.RetryAfterSeconds).To(BeZero(), "nothing is held outside the scope")
			g.Expect(del.RetryAfterSeconds).To(BeZero())
			g.Expect(create.Message).To(BeEmpty())
			g.Expect(rec.Events).To(BeEmpty(), "no Event on a Cluster outside the scope")
		})
	}
}
