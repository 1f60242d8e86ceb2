package webhooks_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"

	"github.com/capi-monolith/capi-monolith/dev/webhooks"
	"github.com/capi-monolith/capi-monolith/test/envtest"
)

var env *envtest.Environment

func TestMain(m *testing.M) {
	envtest.Main(m, &env, envtest.Options{})
}

// A second run on the same data finds the first run's ExtensionConfig while
// Cluster API core's ExtensionConfig controller writes its status: the
// update that loses that race is retried, and neither write is lost.
func TestApplyExtensionConfigSurvivesCoreWritingTheSameObject(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	const name = "capi-monolith-conflict"
	t.Cleanup(func() {
		_ = env.Client.Delete(context.Background(), &runtimev1.ExtensionConfig{ObjectMeta: metav1.ObjectMeta{Name: name}})
	})

	g.Expect(webhooks.ApplyExtensionConfig(ctx, env.Client, webhooks.ExtensionConfig{
		Name: name, URL: "https://127.0.0.1:1000", CABundle: []byte("first CA"), Owner: "first run",
	})).To(Succeed())
	first := &runtimev1.ExtensionConfig{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: name}, first)).To(Succeed())
	g.Expect(first.Spec.ClientConfig.URL).To(Equal("https://127.0.0.1:1000"))
	g.Expect(first.Spec.NamespaceSelector).NotTo(BeNil())
	g.Expect(first.Labels).To(HaveKeyWithValue(webhooks.InstalledByLabel, webhooks.InstalledByValue))
	g.Expect(first.Annotations).To(HaveKeyWithValue(webhooks.OwnerAnnotation, "first run"))

	// Core's controller writes the status between our read and our update,
	// once: our first update is then stale and the apiserver refuses it.
	updates, coreWrote := 0, false
	direct, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	racing := interceptor.NewClient(direct, interceptor.Funcs{
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			updates++
			if !coreWrote {
				coreWrote = true
				latest := &runtimev1.ExtensionConfig{}
				if err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), latest); err != nil {
					return err
				}
				latest.Status.Handlers = []runtimev1.ExtensionHandler{{
					Name:        "before-cluster-create",
					RequestHook: runtimev1.GroupVersionHook{APIVersion: "hooks.runtime.cluster.x-k8s.io/v1alpha1", Hook: "BeforeClusterCreate"},
				}}
				apimeta.SetStatusCondition(&latest.Status.Conditions, metav1.Condition{Type: "Discovered", Status: metav1.ConditionTrue, Reason: "Discovered"})
				if err := env.Client.Status().Update(ctx, latest); err != nil {
					return err
				}
			}
			return c.Update(ctx, obj, opts...)
		},
	})

	g.Expect(webhooks.ApplyExtensionConfig(ctx, racing, webhooks.ExtensionConfig{
		Name: name, URL: "https://127.0.0.1:2000", CABundle: []byte("second CA"), Owner: "second run",
	})).To(Succeed())
	g.Expect(updates).To(Equal(2), "the first update should have lost the race and been retried once")

	got := &runtimev1.ExtensionConfig{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: name}, got)).To(Succeed())
	g.Expect(got.Spec.ClientConfig.URL).To(Equal("https://127.0.0.1:2000"))
	g.Expect(got.Spec.ClientConfig.CABundle).To(Equal([]byte("second CA")))
	g.Expect(got.Annotations).To(HaveKeyWithValue(webhooks.OwnerAnnotation, "second run"))
	g.Expect(got.Status.Handlers).To(HaveLen(1), "core's status write must survive ours")
}
