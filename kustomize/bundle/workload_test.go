package bundle_test

import (
	"testing"

	. "github.com/onsi/gomega"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/capi-monolith/capi-monolith/infra"
	"github.com/capi-monolith/capi-monolith/kustomize/bundle"
)

// The Deployments running the infra module listen for the inMemory
// clusters' workload APIs on the pod's IP and advertise the DNS name of a
// headless Service of their namespace that selects exactly their pods, so
// that Cluster API's controllers in other pods reach every workload API,
// through any restart of the pod; in whatever namespace clusterctl
// installs them. The other providers have neither.
func TestInfraDeploymentsAdvertiseAHeadlessServiceOfTheirPods(t *testing.T) {
	type bundleUnderTest struct {
		p    bundle.Provider
		objs []unstructured.Unstructured
	}
	var all []bundleUnderTest
	for _, p := range bundle.Providers {
		all = append(all, bundleUnderTest{p, components(t, p, "").Objs()}, bundleUnderTest{p, components(t, p, "elsewhere").Objs()})
		if p.Docker != nil {
			all = append(all, bundleUnderTest{p, dockerComponents(t, p).Objs()})
		}
	}
	all = append(all, bundleUnderTest{bundle.AllInOne, allInOne(t)})
	for _, b := range all {
		g := NewWithT(t)
		flags, _ := managerFlags(t, b.objs)
		deployment := ofKind(b.objs, "Deployment")[0]
		ns := deployment.GetNamespace()
		var headless []unstructured.Unstructured
		for _, s := range ofKind(b.objs, "Service") {
			if ip, _, _ := unstructured.NestedString(s.Object, "spec", "clusterIP"); ip == "None" {
				headless = append(headless, s)
			}
		}
		// The infra module's own check of its flags, as at start-up.
		infraOpts := infra.DefaultOptions()
		infraFlags := pflag.NewFlagSet("infra", pflag.ContinueOnError)
		infraOpts.BindFlags(infraFlags)
		infraFlags.VisitAll(func(f *pflag.Flag) {
			if set := flags.Lookup(f.Name); set != nil && set.Changed {
				g.Expect(f.Value.Set(set.Value.String())).To(Succeed(), f.Name)
			}
		})
		g.Expect(infraOpts.Validate()).To(Succeed(), b.p.Label)
		if !hasModule(b.p, "infra") {
			g.Expect(headless).To(BeEmpty(), b.p.Label)
			g.Expect(flags.Changed("inmemory-workload-advertise-host")).To(BeFalse(), b.p.Label)
			continue
		}
		g.Expect(headless).To(HaveLen(1), "%s in %s", b.p.Label, ns)
		svc := headless[0]
		g.Expect(svc.GetNamespace()).To(Equal(ns))
		g.Expect(flags.Lookup("inmemory-workload-address").Value.String()).To(Equal(samplePod["status.podIP"]), b.p.Label)
		g.Expect(flags.Lookup("inmemory-workload-advertise-host").Value.String()).To(Equal(svc.GetName()+"."+ns+".svc"), b.p.Label)
		ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
		g.Expect(ports).To(BeEmpty(), "clients dial the pods' IPs on the cluster's own port")
		selector, _, _ := unstructured.NestedStringMap(svc.Object, "spec", "selector")
		podLabels, _, _ := unstructured.NestedStringMap(deployment.Object, "spec", "template", "metadata", "labels")
		g.Expect(selector).NotTo(BeEmpty())
		for k, v := range selector {
			g.Expect(podLabels).To(HaveKeyWithValue(k, v), "the Service selects the manager's pods")
		}
		// Only these: no other provider's pods carry its provider label.
		g.Expect(selector).To(HaveKey(providerLabel))

		// Two replicas: state in Secrets, the leader's address in a Lease
		// of the namespace (the leader election Role's), failover within
		// about 9 s.
		replicas, _, _ := unstructured.NestedFieldNoCopy(deployment.Object, "spec", "replicas")
		g.Expect(replicas).To(BeEquivalentTo(2))
		g.Expect(flags.Lookup("inmemory-workload-state").Value.String()).To(Equal("secrets"))
		g.Expect(flags.Lookup("inmemory-workload-leader-lease").Value.String()).To(HavePrefix(ns + "/"))
		g.Expect(flags.Lookup("leader-elect-lease-duration").Value.String()).To(Equal("8s"))
	}
}

func hasModule(p bundle.Provider, module string) bool {
	for _, m := range p.Modules {
		if m == module {
			return true
		}
	}
	return false
}
