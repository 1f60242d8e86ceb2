package lifecycle_test

import (
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"

	ipamv1alpha1 "github.com/capi-monolith/capi-monolith/ipam/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/runtimeext/internal/handlers"
	"github.com/capi-monolith/capi-monolith/runtimeext/internal/record"
	"github.com/capi-monolith/capi-monolith/runtimeext/internal/variables"
)

type beforeClusterCreate = func(context.Context, *runtimehooksv1.BeforeClusterCreateRequest, *runtimehooksv1.BeforeClusterCreateResponse)

// moduleBeforeClusterCreate is the BeforeClusterCreate handler as the module
// builds it (handlers.List), over a reader holding stored and a global pool;
// pool reads are counted.
func moduleBeforeClusterCreate(t *testing.T, stored *clusterv1.Cluster) (beforeClusterCreate, *events.FakeRecorder, *int) {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{ipamv1alpha1.AddToScheme, clusterv1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	poolReads := new(int)
	reader := fake.NewClientBuilder().WithScheme(scheme).WithObjects(stored, globalPool("global", 100)).
		WithInterceptorFuncs(interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*clusterv1.Cluster); !ok {
				*poolReads++
			}
			return c.Get(ctx, key, obj, opts...)
		}}).Build()
	rec := events.NewFakeRecorder(10)
	list, err := handlers.List(handlers.Options{Reader: reader, Recorder: &record.Recorder{Events: rec}})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range list {
		if h.Name == "before-cluster-create" {
			return h.HandlerFunc.(beforeClusterCreate), rec, poolReads
		}
	}
	t.Fatal("no before-cluster-create handler")
	return nil, nil, nil
}

// An unauthenticated caller may send any Cluster: one the manager does not
// know (another namespace, a made-up one, a wrong UID) gets a Failure, and
// the manager writes no Event and reads no pool for it.
func TestHooksActOnlyOnClustersTheManagerKnows(t *testing.T) {
	stored := cluster(nil, variable(variables.AddressPools, []variables.PoolRef{{Kind: variables.GlobalPoolKind, Name: "global"}}))
	stored.UID = "real-uid"

	for name, mutate := range map[string]func(c *clusterv1.Cluster){
		"a Cluster in another namespace": func(c *clusterv1.Cluster) { c.Namespace = "kube-system" },
		"a made-up Cluster":              func(c *clusterv1.Cluster) { c.Name = "made-up" },
		"a known name with another UID":  func(c *clusterv1.Cluster) { c.UID = "guessed" },
		"a Cluster without a UID":        func(c *clusterv1.Cluster) { c.UID = "" },
	} {
		t.Run(name+" gets a Failure, no Event and no pool read", func(t *testing.T) {
			g := NewWithT(t)
			fn, rec, poolReads := moduleBeforeClusterCreate(t, stored.DeepCopy())
			req := &runtimehooksv1.BeforeClusterCreateRequest{Cluster: *stored.DeepCopy()}
			mutate(&req.Cluster)
			resp := &runtimehooksv1.BeforeClusterCreateResponse{}
			fn(context.Background(), req, resp)
			g.Expect(resp.Status).To(Equal(runtimehooksv1.ResponseStatusFailure))
			g.Expect(resp.Message).To(ContainSubstring("not a Cluster this extension serves"))
			g.Expect(rec.Events).To(BeEmpty())
			g.Expect(*poolReads).To(BeZero())
		})
	}

	t.Run("the known Cluster is served from its stored copy, not the request's", func(t *testing.T) {
		g := NewWithT(t)
		fn, rec, poolReads := moduleBeforeClusterCreate(t, stored.DeepCopy())
		req := &runtimehooksv1.BeforeClusterCreateRequest{Cluster: *stored.DeepCopy()}
		// A forged topology naming another pool is not what is checked.
		req.Cluster.Spec.Topology.Variables = []clusterv1.ClusterVariable{variable(variables.AddressPools, []variables.PoolRef{{Kind: variables.GlobalPoolKind, Name: "secret"}})}
		resp := &runtimehooksv1.BeforeClusterCreateResponse{}
		fn(context.Background(), req, resp)
		g.Expect(resp.Status).To(Equal(runtimehooksv1.ResponseStatusSuccess), resp.Message)
		g.Expect(resp.Message).NotTo(ContainSubstring("secret"))
		g.Expect(*poolReads).To(BeNumerically(">", 0))
		g.Expect(<-rec.Events).To(HavePrefix("Normal BeforeClusterCreate "))
	})
}

// beforeClusterCreateOver is the module's BeforeClusterCreate over a cache
// and an API reader of their own.
func beforeClusterCreateOver(t *testing.T, cache, apiReader client.Reader) beforeClusterCreate {
	t.Helper()
	list, err := handlers.List(handlers.Options{Reader: cache, APIReader: apiReader, Recorder: &record.Recorder{Events: events.NewFakeRecorder(10)}})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range list {
		if h.Name == "before-cluster-create" {
			return h.HandlerFunc.(beforeClusterCreate)
		}
	}
	t.Fatal("no before-cluster-create handler")
	return nil
}

// Cluster API calls BeforeClusterCreate as soon as a Cluster is created,
// often before the extension's cache has it (issue 28): the Cluster is read
// past the cache, and a read that fails asks to be called again; neither is
// a Failure.
func TestAClusterNotYetInTheCacheIsReadPastItOrRetriedNeverFailed(t *testing.T) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{ipamv1alpha1.AddToScheme, clusterv1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	fresh := cluster(nil)
	fresh.UID = "fresh-uid"
	// The cache has the pool the Cluster names, not the Cluster yet.
	emptyCache := fake.NewClientBuilder().WithScheme(scheme).WithObjects(globalPool("global", 100)).Build()

	t.Run("found past the cache: served", func(t *testing.T) {
		g := NewWithT(t)
		apiserver := fake.NewClientBuilder().WithScheme(scheme).WithObjects(fresh.DeepCopy()).Build()
		resp := &runtimehooksv1.BeforeClusterCreateResponse{}
		beforeClusterCreateOver(t, emptyCache, apiserver)(context.Background(), &runtimehooksv1.BeforeClusterCreateRequest{Cluster: *fresh.DeepCopy()}, resp)
		g.Expect(resp.Status).To(Equal(runtimehooksv1.ResponseStatusSuccess), resp.Message)
		g.Expect(resp.RetryAfterSeconds).To(BeZero())
	})
	t.Run("unreadable: asked again, not failed", func(t *testing.T) {
		g := NewWithT(t)
		broken := fake.NewClientBuilder().WithScheme(scheme).WithInterceptorFuncs(interceptor.Funcs{
			Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
				return errors.New("connection refused")
			}}).Build()
		resp := &runtimehooksv1.BeforeClusterCreateResponse{}
		beforeClusterCreateOver(t, emptyCache, broken)(context.Background(), &runtimehooksv1.BeforeClusterCreateRequest{Cluster: *fresh.DeepCopy()}, resp)
		g.Expect(resp.Status).To(Equal(runtimehooksv1.ResponseStatusSuccess), resp.Message)
		g.Expect(resp.RetryAfterSeconds).To(BeNumerically(">", 0))
	})
	t.Run("absent past the cache too: a Failure, as for a made-up Cluster", func(t *testing.T) {
		g := NewWithT(t)
		resp := &runtimehooksv1.BeforeClusterCreateResponse{}
		beforeClusterCreateOver(t, emptyCache, fake.NewClientBuilder().WithScheme(scheme).Build())(context.Background(), &runtimehooksv1.BeforeClusterCreateRequest{Cluster: *fresh.DeepCopy()}, resp)
		g.Expect(resp.Status).To(Equal(runtimehooksv1.ResponseStatusFailure))
	})
}
