package bundle_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"

	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	"sigs.k8s.io/cluster-api/cmd/clusterctl/client"
	utilyaml "sigs.k8s.io/cluster-api/util/yaml"

	"github.com/capi-monolith/capi-monolith/kustomize/bundle"
)

// restricted evaluates a Deployment's pod against the restricted Pod
// Security Standard with the admission plugin's own checks, and returns
// the checks it fails, by ID.
func restricted(t *testing.T, d unstructured.Unstructured) []string {
	t.Helper()
	g := NewWithT(t)
	dep := &appsv1.Deployment{}
	g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(d.Object, dep)).To(Succeed())
	evaluator, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	g.Expect(err).NotTo(HaveOccurred())
	var failed []string
	for _, r := range evaluator.EvaluatePod(api.LevelVersion{Level: api.LevelRestricted, Version: api.LatestVersion()},
		&dep.Spec.Template.ObjectMeta, &dep.Spec.Template.Spec) {
		if !r.Allowed {
			failed = append(failed, r.ForbiddenReason+": "+r.ForbiddenDetail)
		}
	}
	// Not part of the standard, but of what the bundles promise.
	for _, c := range dep.Spec.Template.Spec.Containers {
		g.Expect(c.SecurityContext).NotTo(BeNil())
		g.Expect(c.SecurityContext.ReadOnlyRootFilesystem).To(HaveValue(BeTrue()), "container %s", c.Name)
	}
	return failed
}

// dockerComponents reads a provider's Docker variant the way `clusterctl
// init --config clusterctl-docker.yaml` does.
func dockerComponents(t *testing.T, p bundle.Provider) client.Components {
	t.Helper()
	g := NewWithT(t)
	c, err := client.New(context.Background(), filepath.Join(repoDir, bundle.ClusterctlDockerConfigFile))
	g.Expect(err).NotTo(HaveOccurred())
	comps, err := c.GetProviderComponents(context.Background(), bundle.ProviderName, clusterctlv1.ProviderType(p.Type),
		client.ComponentsOptions{Version: testVersion})
	g.Expect(err).NotTo(HaveOccurred(), "clusterctl failed to read the %s Docker components", p.Label)
	return comps
}

// processed is a file of the test repository with its variables at their
// defaults (`clusterctl generate yaml --from`).
func processed(t *testing.T, name string) []unstructured.Unstructured {
	t.Helper()
	g := NewWithT(t)
	raw, err := os.ReadFile(filepath.Join(repoDir, name))
	g.Expect(err).NotTo(HaveOccurred())
	c, err := clusterctlClient(context.Background())
	g.Expect(err).NotTo(HaveOccurred())
	tmpl, err := c.ProcessYAML(context.Background(), client.ProcessYAMLOptions{ReaderSource: &client.ReaderSourceOptions{Reader: bytes.NewReader(raw)}})
	g.Expect(err).NotTo(HaveOccurred())
	y, err := tmpl.Yaml()
	g.Expect(err).NotTo(HaveOccurred())
	objs, err := utilyaml.ToUnstructured(y)
	g.Expect(err).NotTo(HaveOccurred())
	return objs
}

// An install without the docker backend (every default components file, the
// all-in-one file) runs under the restricted Pod Security Standard; the
// Docker variants do not (the node's socket is a hostPath volume), which
// also shows the check can fail.
func TestDefaultComponentsRunUnderRestrictedPodSecurity(t *testing.T) {
	for _, p := range bundle.Providers {
		t.Run(p.Label, func(t *testing.T) {
			g := NewWithT(t)
			deployments := ofKind(components(t, p, "").Objs(), "Deployment")
			g.Expect(deployments).To(HaveLen(1))
			g.Expect(restricted(t, deployments[0])).To(BeEmpty())
			if p.Docker == nil {
				return
			}
			deployments = ofKind(dockerComponents(t, p).Objs(), "Deployment")
			g.Expect(deployments).To(HaveLen(1))
			g.Expect(restricted(t, deployments[0])).To(ConsistOf(ContainSubstring(`volume "docker-socket" uses restricted volume type "hostPath"`)))
		})
	}
	t.Run("all-in-one", func(t *testing.T) {
		g := NewWithT(t)
		deployments := ofKind(processed(t, bundle.AllInOneFile), "Deployment")
		g.Expect(deployments).To(HaveLen(1))
		g.Expect(restricted(t, deployments[0])).To(BeEmpty())
		deployments = ofKind(processed(t, bundle.AllInOneDockerFile), "Deployment")
		g.Expect(deployments).To(HaveLen(1))
		g.Expect(restricted(t, deployments[0])).To(ConsistOf(ContainSubstring(`volume "docker-socket" uses restricted volume type "hostPath"`)))
	})
}

// The Docker variants are the default components plus the node's socket
// and its group, nothing else; the default components have neither.
func TestDockerVariantsAddOnlyTheSocket(t *testing.T) {
	type pair struct {
		name          string
		plain, docker []unstructured.Unstructured
	}
	var pairs []pair
	for _, p := range bundle.Providers {
		if p.Docker != nil {
			pairs = append(pairs, pair{p.Label, components(t, p, "").Objs(), dockerComponents(t, p).Objs()})
		}
	}
	pairs = append(pairs, pair{"all-in-one", processed(t, bundle.AllInOneFile), processed(t, bundle.AllInOneDockerFile)})
	g := NewWithT(t)
	g.Expect(pairs).To(HaveLen(2))
	for _, pr := range pairs {
		t.Run(pr.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(names(pr.docker)).To(Equal(names(pr.plain)))
			plain, docker := ofKind(pr.plain, "Deployment"), ofKind(pr.docker, "Deployment")
			g.Expect(plain).To(HaveLen(1))
			g.Expect(docker).To(HaveLen(1))
			for d, wantSocket := range map[*unstructured.Unstructured]bool{&plain[0]: false, &docker[0]: true} {
				dep := &appsv1.Deployment{}
				g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(d.Object, dep)).To(Succeed())
				pod := dep.Spec.Template.Spec
				hasSocket := false
				for _, v := range pod.Volumes {
					if v.HostPath != nil {
						g.Expect(v.Name).To(Equal("docker-socket"))
						g.Expect(v.HostPath.Path).To(Equal("/var/run/docker.sock"))
						hasSocket = true
					}
				}
				mounted := false
				for _, m := range pod.Containers[0].VolumeMounts {
					mounted = mounted || (m.Name == "docker-socket" && m.MountPath == "/var/run/docker.sock")
				}
				g.Expect(hasSocket).To(Equal(wantSocket))
				g.Expect(mounted).To(Equal(wantSocket))
				if wantSocket {
					g.Expect(pod.SecurityContext.SupplementalGroups).To(Equal([]int64{0}))
				} else {
					g.Expect(pod.SecurityContext.SupplementalGroups).To(BeEmpty())
				}
			}
			g.Expect(sharedManagerSpec(t, docker[0])).To(Equal(sharedManagerSpec(t, plain[0])))
		})
	}
}
