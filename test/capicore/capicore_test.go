package capicore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1beta1 "sigs.k8s.io/cluster-api/api/core/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/capi-monolith/capi-monolith/test/capicore"
	"github.com/capi-monolith/capi-monolith/test/envtest"
)

var env *envtest.Environment

func TestMain(m *testing.M) {
	ctrl.SetLogger(envtest.TestLogger())
	scheme, err := envtest.NewScheme()
	if err == nil {
		err = addToScheme(scheme)
	}
	if err == nil {
		env, err = envtest.Start(context.Background(), envtest.Options{
			Scheme: scheme,
			// The smoke CRD, and ours for the tests of what core makes of
			// our objects (mirror_test.go).
			CRDDirectoryPaths: []string{
				"testdata",
				filepath.Join("..", "..", "manifests", "infra", "crd"),
				filepath.Join("..", "..", "manifests", "machinepool", "crd"),
				filepath.Join("..", "..", "manifests", "ipam", "crd"),
			},
		})
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.Exit(code)
}

func TestCoreOwnsTheInfraClusterOfACluster(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()

	started := time.Now()
	core, err := capicore.Start(ctx, capicore.Options{Config: env.Config})
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("Cluster API core ready in %s", time.Since(started).Round(time.Millisecond))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("Cluster API core output:\n%s", core.Output())
		}
		_ = core.Stop()
	})

	ns, err := env.CreateNamespace(ctx, "smoke")
	g.Expect(err).NotTo(HaveOccurred())
	infra := &unstructured.Unstructured{}
	infra.SetAPIVersion("infrastructure.cluster.x-k8s.io/v1alpha1")
	infra.SetKind("SmokeInfraCluster")
	infra.SetNamespace(ns.Name)
	infra.SetName("smoke")
	g.Expect(env.Client.Create(ctx, infra)).To(Succeed())
	cluster := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "smoke"},
		Spec: clusterv1.ClusterSpec{
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: "infrastructure.cluster.x-k8s.io",
				Kind:     "SmokeInfraCluster",
				Name:     infra.GetName(),
			},
		},
	}
	// Core's admission webhooks (failurePolicy: Fail) admit the Cluster, so
	// the apiserver reached the process over TLS with the CA Start made.
	g.Expect(env.Client.Create(ctx, cluster)).To(Succeed())

	created := time.Now()
	g.Eventually(func() ([]metav1.OwnerReference, error) {
		select {
		case <-core.Exited():
			return nil, StopTrying("Cluster API core exited").Wrap(fmt.Errorf("exit: %w", core.Err()))
		default:
		}
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(infra.GroupVersionKind())
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(infra), got)
		return got.GetOwnerReferences(), err
	}).WithTimeout(60 * time.Second).WithPolling(200 * time.Millisecond).Should(ContainElement(And(
		HaveField("APIVersion", clusterv1.GroupVersion.String()),
		HaveField("Kind", "Cluster"),
		HaveField("Name", cluster.Name),
		HaveField("UID", cluster.UID),
	)))
	t.Logf("Owner reference set %s after the Cluster was created", time.Since(created).Round(time.Millisecond))

	// A v1beta1 read goes through core's conversion webhook, which turns the
	// contract-versioned reference back into an apiVersion.
	old := &clusterv1beta1.Cluster{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(cluster), old)).To(Succeed())
	g.Expect(old.Spec.InfrastructureRef).NotTo(BeNil())
	g.Expect(old.Spec.InfrastructureRef.APIVersion).To(Equal("infrastructure.cluster.x-k8s.io/v1alpha1"))

	name := core.WebhookConfigurationName()
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: name}, &admissionregistrationv1.MutatingWebhookConfiguration{})).To(Succeed())
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: name}, &admissionregistrationv1.ValidatingWebhookConfiguration{})).To(Succeed())

	pid := core.PID()
	stopping := time.Now()
	g.Expect(core.Stop()).To(Succeed())
	t.Logf("Cluster API core stopped in %s", time.Since(stopping).Round(time.Millisecond))
	g.Expect(core.Exited()).To(BeClosed())
	g.Expect(syscall.Kill(pid, 0)).To(MatchError(syscall.ESRCH), "the process must be gone")
	g.Expect(syscall.Kill(-pid, 0)).To(MatchError(syscall.ESRCH), "its process group must be gone")

	err = env.Client.Get(ctx, client.ObjectKey{Name: name}, &admissionregistrationv1.MutatingWebhookConfiguration{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "MutatingWebhookConfiguration: %v", err)
	err = env.Client.Get(ctx, client.ObjectKey{Name: name}, &admissionregistrationv1.ValidatingWebhookConfiguration{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "ValidatingWebhookConfiguration: %v", err)

	crd := &apiextensionsv1.CustomResourceDefinition{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: "clusters.cluster.x-k8s.io"}, crd)).To(Succeed())
	g.Expect(crd.Spec.Conversion.Strategy).To(Equal(apiextensionsv1.NoneConverter), "Stop gives the CRD its conversion back")

	g.Expect(core.Stop()).To(Succeed(), "Stop is idempotent")
}

func TestStartFailsNamingTheMakeTargetWhenTheBinaryIsMissing(t *testing.T) {
	g := NewWithT(t)
	_, err := capicore.Start(t.Context(), capicore.Options{
		Config:     env.Config,
		BinaryPath: "/nonexistent/manager",
	})
	g.Expect(err).To(MatchError(ContainSubstring("make capi-core")))
	g.Expect(errors.Is(err, os.ErrNotExist)).To(BeTrue())
}

func TestStartFailsWithTheOutputWhenTheProcessExitsEarly(t *testing.T) {
	g := NewWithT(t)
	_, err := capicore.Start(t.Context(), capicore.Options{
		Config:    env.Config,
		ExtraArgs: []string{"--no-such-flag"},
	})
	g.Expect(err).To(MatchError(ContainSubstring("exited before it was ready")))
	g.Expect(err).To(MatchError(ContainSubstring("unknown flag: --no-such-flag")), "the error carries the process's last output")

	// A failed Start cleans up after itself.
	var mutating admissionregistrationv1.MutatingWebhookConfigurationList
	g.Expect(env.Client.List(t.Context(), &mutating)).To(Succeed())
	g.Expect(mutating.Items).To(BeEmpty())
	crd := &apiextensionsv1.CustomResourceDefinition{}
	g.Expect(env.Client.Get(t.Context(), client.ObjectKey{Name: "clusters.cluster.x-k8s.io"}, crd)).To(Succeed())
	g.Expect(crd.Spec.Conversion.Strategy).To(Equal(apiextensionsv1.NoneConverter))
}
