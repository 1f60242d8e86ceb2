package bundle

import (
	"strings"
	"testing"
	"testing/fstest"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/kustomize/kyaml/kio"

	"github.com/capi-monolith/capi-monolith/kustomize"
)

// TestModulesJoinWithoutGeneratorChanges builds from manifests where some
// modules have nothing yet and others have new kinds of objects: bundles
// still build, and take exactly what exists.
func TestModulesJoinWithoutGeneratorChanges(t *testing.T) {
	g := NewWithT(t)
	src := sources{kustomize: kustomize.FS, manifests: fstest.MapFS{
		"machinepool/crd/pools.yaml": {Data: []byte(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: monolithmachinepools.infrastructure.cluster.x-k8s.io
spec:
  group: infrastructure.cluster.x-k8s.io
  names: {kind: MonolithMachinePool, plural: monolithmachinepools}
  scope: Namespaced
  versions: []
`)},
		"machinepool/rbac/role.yaml": {Data: []byte(`apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: capi-monolith-machinepool-manager
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: capi-monolith-machinepool-manager
  namespace: system
`)},
		"machinepool/webhook/manifests.yaml": {Data: []byte(`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: validating-webhook-configuration
webhooks:
- name: validation.monolithmachinepool.infrastructure.cluster.x-k8s.io
  clientConfig:
    service: {name: webhook-service, namespace: system, path: /validate}
`)},
	}}
	repo, err := src.build(Options{Version: "v0.1.0"})
	g.Expect(err).NotTo(HaveOccurred())

	objs, err := kio.FromBytes(repo["infrastructure-monolith/v0.1.0/infrastructure-components.yaml"])
	g.Expect(err).NotTo(HaveOccurred())
	got := map[string]string{}
	for _, o := range objs {
		got[o.GetKind()+"/"+o.GetName()] = o.GetNamespace()
	}
	const prefix = "capi-monolith-infrastructure-"
	g.Expect(got).To(HaveKey("CustomResourceDefinition/monolithmachinepools.infrastructure.cluster.x-k8s.io"))
	g.Expect(got).To(HaveKey("ClusterRoleBinding/" + prefix + "capi-monolith-machinepool-manager"))
	g.Expect(got).To(HaveKeyWithValue("RoleBinding/"+prefix+"capi-monolith-machinepool-manager", "capi-monolith-infrastructure"))
	g.Expect(got).To(HaveKey("ValidatingWebhookConfiguration/" + prefix + "machinepool-validating-webhook-configuration"))
	for _, o := range objs {
		if o.GetKind() == "RoleBinding" || o.GetKind() == "ClusterRoleBinding" {
			s, _ := o.String()
			g.Expect(s).To(ContainSubstring("name: " + prefix + "manager\n  namespace: capi-monolith-infrastructure"))
		}
		if o.GetKind() == "ValidatingWebhookConfiguration" {
			s, _ := o.String()
			g.Expect(s).To(ContainSubstring("name: " + prefix + "webhook-service\n      namespace: capi-monolith-infrastructure"))
		}
	}
	// Modules with no manifests at all still build, with their bundle's
	// shared parts only.
	ipam := string(repo["ipam-monolith/v0.1.0/ipam-components.yaml"])
	g.Expect(ipam).NotTo(ContainSubstring("kind: CustomResourceDefinition"))
	g.Expect(strings.Count(ipam, "kind: Deployment")).To(Equal(1))
}
