package bundle_test

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/kustomize/kyaml/kio"

	"github.com/capi-monolith/capi-monolith/kustomize/bundle"
	"github.com/capi-monolith/capi-monolith/manifests"
)

const providerLabel = "cluster.x-k8s.io/provider"

// componentsVariables are the clusterctl variables of every components
// file, each with a default (docs/bundles.md lists them).
// (clusterctl lists the outer variable of a nested default only: the
// MONOLITH_* aliases of the CAPI_* ones are not listed.)
var componentsVariables = []string{
	"CAPI_DIAGNOSTICS_ADDRESS",
	"CAPI_INSECURE_DIAGNOSTICS",
	"MONOLITH_IMAGE",
	"MONOLITH_IMAGE_PULL_POLICY",
	"MONOLITH_LOG_LEVEL",
}

// Cluster API's common diagnostics variables set the manager's flags in
// every components file as in Cluster API's own providers; the earlier
// MONOLITH_* names still work when the CAPI_* ones are unset.
func TestDiagnosticsVariablesAreClusterAPIsWithOurAliases(t *testing.T) {
	for _, tc := range []struct {
		name     string
		env      map[string]string
		address  string
		insecure bool
	}{
		{"defaults", nil, ":8443", false},
		{"Cluster API's names", map[string]string{"CAPI_DIAGNOSTICS_ADDRESS": ":9443", "CAPI_INSECURE_DIAGNOSTICS": "true"}, ":9443", true},
		{"the aliases", map[string]string{"MONOLITH_DIAGNOSTICS_ADDRESS": ":7443", "MONOLITH_INSECURE_DIAGNOSTICS": "true"}, ":7443", true},
		{"Cluster API's names win over the aliases", map[string]string{
			"CAPI_DIAGNOSTICS_ADDRESS": ":9443", "CAPI_INSECURE_DIAGNOSTICS": "false",
			"MONOLITH_DIAGNOSTICS_ADDRESS": ":7443", "MONOLITH_INSECURE_DIAGNOSTICS": "true",
		}, ":9443", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			for _, p := range bundle.Providers {
				g := NewWithT(t)
				_, opts := managerFlags(t, components(t, p, "").Objs())
				g.Expect(opts.Diagnostics.DiagnosticsAddress).To(Equal(tc.address), p.Label)
				g.Expect(opts.Diagnostics.InsecureDiagnostics).To(Equal(tc.insecure), p.Label)
			}
			_, opts := managerFlags(t, processed(t, bundle.AllInOneFile))
			NewWithT(t).Expect(opts.Diagnostics.DiagnosticsAddress).To(Equal(tc.address), "all-in-one")
		})
	}
}

func TestComponentsFollowClusterctlsContract(t *testing.T) {
	for _, p := range bundle.Providers {
		t.Run(p.Label, func(t *testing.T) {
			g := NewWithT(t)
			raw := rawObjects(t, componentsPath(p))
			namespaces := ofKind(raw, "Namespace")
			g.Expect(namespaces).To(HaveLen(1), "exactly one Namespace per components file")
			for _, o := range raw {
				g.Expect(o.GetLabels()).To(HaveKeyWithValue(providerLabel, p.Label), "%s %s", o.GetKind(), o.GetName())
			}

			comps := components(t, p, "")
			g.Expect(comps.TargetNamespace()).To(Equal(namespaces[0].GetName()))
			// Where dev records the provider in clusterctl's inventory.
			g.Expect(p.Namespace).To(Equal(comps.TargetNamespace()))
			for _, o := range comps.Objs() {
				if namespaced(g, o) {
					g.Expect(o.GetNamespace()).To(Equal(comps.TargetNamespace()), "%s %s", o.GetKind(), o.GetName())
				}
			}
			g.Expect(comps.Variables()).To(ConsistOf(componentsVariables))
			if p.Docker != nil {
				// The docker backend's socket group.
				g.Expect(dockerComponents(t, p).Variables()).To(ConsistOf(append(slices.Clone(componentsVariables), "MONOLITH_DOCKER_SOCKET_GID")))
			}
			g.Expect(comps.Images()).To(ConsistOf(bundle.DefaultImageRepository + ":" + testVersion))

			// Every variable has a default: processing with none set works,
			// and leaves no ${ behind.
			y, err := comps.Yaml()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(y)).NotTo(ContainSubstring("${"))

			// The manager container is what clusterctl waits for; it does
			// not check it itself.
			_, opts := managerFlags(t, comps.Objs())
			g.Expect(opts.EnableModules).To(Equal(p.Modules))
		})
	}
}

func TestComponentsMoveToAnotherTargetNamespace(t *testing.T) {
	const target = "elsewhere"
	for _, p := range bundle.Providers {
		t.Run(p.Label, func(t *testing.T) {
			g := NewWithT(t)
			comps := components(t, p, target)
			g.Expect(comps.TargetNamespace()).To(Equal(target))
			g.Expect(names(ofKind(comps.Objs(), "Namespace"))).To(Equal([]string{target}))
			var service string
			for _, o := range comps.Objs() {
				if namespaced(g, o) {
					g.Expect(o.GetNamespace()).To(Equal(target), "%s %s", o.GetKind(), o.GetName())
				}
				if o.GetKind() == "Service" && strings.HasSuffix(o.GetName(), "webhook-service") {
					service = o.GetName()
				}
			}
			g.Expect(service).NotTo(BeEmpty())
			certs := ofKind(comps.Objs(), "Certificate")
			g.Expect(certs).To(HaveLen(1))
			dnsNames, _, _ := unstructured.NestedStringSlice(certs[0].Object, "spec", "dnsNames")
			g.Expect(dnsNames).To(ConsistOf(service+"."+target+".svc", service+"."+target+".svc.cluster.local"))
			for _, kind := range []string{"ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"} {
				for _, w := range ofKind(comps.Objs(), kind) {
					g.Expect(w.GetAnnotations()).To(HaveKeyWithValue("cert-manager.io/inject-ca-from", target+"/"+certs[0].GetName()))
					hooks, _, _ := unstructured.NestedSlice(w.Object, "webhooks")
					for _, h := range hooks {
						svc, _, _ := unstructured.NestedMap(h.(map[string]any), "clientConfig", "service")
						g.Expect(svc).To(HaveKeyWithValue("namespace", target))
						g.Expect(svc).To(HaveKeyWithValue("name", service))
					}
				}
			}
			for _, kind := range []string{"ClusterRoleBinding", "RoleBinding"} {
				for _, b := range ofKind(comps.Objs(), kind) {
					subjects, _, _ := unstructured.NestedSlice(b.Object, "subjects")
					for _, s := range subjects {
						g.Expect(s).To(HaveKeyWithValue("namespace", target), "%s %s", kind, b.GetName())
					}
				}
			}
		})
	}
}

// TestEveryObjectBelongsToOneBundle: clusterctl merge-patches an object two
// providers share, and deleting one provider (with its CRDs) then deletes
// what the other needs.
func TestEveryObjectBelongsToOneBundle(t *testing.T) {
	g := NewWithT(t)
	owner := map[string]string{}
	claim := func(key, by string) {
		if prev, ok := owner[key]; ok {
			t.Errorf("%s is in both %s and %s", key, prev, by)
		}
		owner[key] = by
	}
	leases := map[string]string{}
	for _, p := range bundle.Providers {
		comps := components(t, p, "")
		claim("Namespace/"+comps.TargetNamespace(), p.Label)
		for _, o := range comps.Objs() {
			if !namespaced(g, o) && o.GetKind() != "Namespace" {
				claim(o.GetKind()+"/"+o.GetName(), p.Label)
			}
			if o.GetKind() == "Certificate" {
				secret, _, _ := unstructured.NestedString(o.Object, "spec", "secretName")
				claim("Secret/"+secret, p.Label)
			}
		}
		_, opts := managerFlags(t, comps.Objs())
		leases[opts.LeaderElectionID] = p.Label
	}
	// The all-in-one file carries every CRD (it replaces the three bundles
	// on dev clusters), but nothing else of theirs.
	all := allInOne(t)
	for _, o := range all {
		key := o.GetKind() + "/" + o.GetName()
		if o.GetKind() == "CustomResourceDefinition" {
			g.Expect(owner).To(HaveKey(key), "the all-in-one file has a CRD no provider bundle has")
			continue
		}
		if !namespaced(g, o) {
			claim(key, "all-in-one")
		}
		if o.GetKind() == "Certificate" {
			secret, _, _ := unstructured.NestedString(o.Object, "spec", "secretName")
			claim("Secret/"+secret, "all-in-one")
		}
	}
	_, opts := managerFlags(t, all)
	leases[opts.LeaderElectionID] = "all-in-one"
	g.Expect(leases).To(HaveLen(len(bundle.Providers)+1), "every Deployment has its own leader election ID: %v", leases)
}

// TestDeploymentsDifferOnlyInTheirModules: which modules each Deployment
// runs, which CRDs each bundle carries, and the flags every manager needs.
func TestDeploymentsDifferOnlyInTheirModules(t *testing.T) {
	type bundleUnderTest struct {
		p    bundle.Provider
		objs []unstructured.Unstructured
	}
	var all []bundleUnderTest
	for _, p := range bundle.Providers {
		all = append(all, bundleUnderTest{p, components(t, p, "").Objs()})
	}
	all = append(all, bundleUnderTest{bundle.AllInOne, allInOne(t)})
	for _, b := range all {
		t.Run(b.p.Label, func(t *testing.T) {
			g := NewWithT(t)
			flags, opts := managerFlags(t, b.objs)
			g.Expect(opts.EnableModules).To(Equal(b.p.Modules))
			g.Expect(opts.LeaderElect).To(BeTrue())
			// clusterctl's contract: the manager supports --namespace, and
			// clusterctl installs it watching every namespace.
			g.Expect(flags.Lookup("namespace")).NotTo(BeNil())
			g.Expect(flags.Changed("namespace")).To(BeFalse(), "--namespace must not be set (or templated)")
			g.Expect(opts.WatchNamespace).To(BeEmpty())

			deployment := ofKind(b.objs, "Deployment")[0]
			env, _, _ := unstructured.NestedSlice(deployment.Object, "spec", "template", "spec", "containers")
			g.Expect(fmt.Sprint(env)).To(ContainSubstring("name:POD_NAMESPACE valueFrom:map[fieldRef:map[fieldPath:metadata.namespace]]"))

			// The runtime extension is served behind the webhook Service,
			// with the webhook certificate; the Deployment registers
			// itself from these flags, its ExtensionConfig owned by a
			// ClusterRole of the bundle, which it may read.
			services := ofKind(b.objs, "Service")
			var webhookService string
			for _, s := range services {
				if strings.HasSuffix(s.GetName(), "-webhook-service") {
					webhookService = s.GetName()
				}
			}
			certs := ofKind(b.objs, "Certificate")
			g.Expect(certs).To(HaveLen(1))
			secret, _, _ := unstructured.NestedString(certs[0].Object, "spec", "secretName")
			dnsNames, _, _ := unstructured.NestedStringSlice(certs[0].Object, "spec", "dnsNames")
			ns := deployment.GetNamespace()
			g.Expect(dnsNames).To(ConsistOf(webhookService+"."+ns+".svc", webhookService+"."+ns+".svc.cluster.local"))
			g.Expect(fmt.Sprint(deployment.Object)).To(ContainSubstring("secretName:" + secret))
			g.Expect(ofKind(b.objs, "ExtensionConfig")).To(BeEmpty(), "no ExtensionConfig in a components file")
			if slices.Contains(b.p.Modules, "runtimeext") {
				g.Expect(flags.Lookup("runtimeext-service-name").Value.String()).To(Equal(webhookService))
				g.Expect(flags.Lookup("runtimeext-ca-secret").Value.String()).To(Equal(secret))
				g.Expect(flags.Lookup("runtimeext-self-register").Value.String()).To(Equal("true"))
				g.Expect(flags.Lookup("runtimeext-extension-config-name").Value.String()).To(Equal("monolith"))
				// Only namespaces that opt in.
				g.Expect(flags.Lookup("runtimeext-namespace-selector").Value.String()).To(Equal("runtime.capi-monolith.dev/enabled=true"))
				owner := flags.Lookup("runtimeext-extension-config-owner").Value.String()
				g.Expect(owner).To(HavePrefix(ns+"-"), "clusterctl delete removes cluster-wide objects named with the namespace's prefix only")
				var role *unstructured.Unstructured
				for _, r := range ofKind(b.objs, "ClusterRole") {
					if r.GetName() == owner {
						role = &r
					}
				}
				g.Expect(role).NotTo(BeNil(), "the owner %s is a ClusterRole of the bundle", owner)
				rules, _, _ := unstructured.NestedSlice(role.Object, "rules")
				g.Expect(rules).To(ContainElements(
					HaveKeyWithValue("resourceNames", ConsistOf(owner)),
					HaveKeyWithValue("resourceNames", ConsistOf("monolith")),
				))
				g.Expect(names(ofKind(b.objs, "ClusterRoleBinding"))).To(ContainElement(owner))
			} else {
				g.Expect(flags.Changed("runtimeext-service-name")).To(BeFalse())
			}

			// Exactly the CRDs of the bundle's modules.
			var want []string
			for _, m := range b.p.Modules {
				want = append(want, moduleCRDs(t, m)...)
			}
			slices.Sort(want)
			crds := ofKind(b.objs, "CustomResourceDefinition")
			g.Expect(names(crds)).To(Equal(want))
			for _, crd := range crds {
				if b.p.Type != "" {
					g.Expect(crd.GetLabels()).To(HaveKeyWithValue(providerLabel, b.p.Label))
				}
				g.Expect(crd.GetLabels()).To(HaveKeyWithValue("cluster.x-k8s.io/v1beta2", "v1alpha1"))
			}
		})
	}
	// Apart from names and the flags above, every Deployment runs the same
	// manager the same way.
	g := NewWithT(t)
	first := sharedManagerSpec(t, ofKind(all[0].objs, "Deployment")[0])
	firstJSON, err := json.MarshalIndent(first, "", " ")
	g.Expect(err).NotTo(HaveOccurred())
	for _, b := range all[1:] {
		other, err := json.MarshalIndent(sharedManagerSpec(t, ofKind(b.objs, "Deployment")[0]), "", " ")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(other)).To(Equal(string(firstJSON)), b.p.Label)
	}
	var container corev1.Container
	g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(first["container"].(map[string]any), &container)).To(Succeed())
	g.Expect(container.SecurityContext.ReadOnlyRootFilesystem).To(HaveValue(BeTrue()))
	g.Expect(container.SecurityContext.AllowPrivilegeEscalation).To(HaveValue(BeFalse()))
	g.Expect(container.Resources.Requests).To(HaveKey(corev1.ResourceCPU))
	g.Expect(container.Resources.Requests).To(HaveKey(corev1.ResourceMemory))
	g.Expect(container.ReadinessProbe.HTTPGet.Path).To(Equal("/readyz"))
	g.Expect(container.LivenessProbe.HTTPGet.Path).To(Equal("/healthz"))
	var pod corev1.PodSpec
	g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(first["pod"].(map[string]any), &pod)).To(Succeed())
	g.Expect(pod.SecurityContext.RunAsNonRoot).To(HaveValue(BeTrue()))

	// What the modules' manifests hold today, so that losing them shows.
	infra := names(ofKind(all[0].objs, "CustomResourceDefinition"))
	g.Expect(infra).To(ContainElements(
		"monolithclusters.infrastructure.cluster.x-k8s.io", "monolithclustertemplates.infrastructure.cluster.x-k8s.io",
		"monolithmachines.infrastructure.cluster.x-k8s.io", "monolithmachinetemplates.infrastructure.cluster.x-k8s.io"))
	ipam := ofKind(all[1].objs, "CustomResourceDefinition")
	g.Expect(names(ipam)).To(Equal([]string{"globalmonolithippools.ipam.cluster.x-k8s.io",
		"monolithipallocations.ipam.cluster.x-k8s.io", "monolithippools.ipam.cluster.x-k8s.io"}))
	for _, crd := range ipam {
		if crd.GetName() == "monolithipallocations.ipam.cluster.x-k8s.io" {
			// Allocation records stay behind on clusterctl move: the
			// target's ipam module records the moved IPAddresses anew.
			g.Expect(crd.GetLabels()).NotTo(HaveKey("clusterctl.cluster.x-k8s.io/move-hierarchy"))
			continue
		}
		// Pools are no Cluster's descendants: clusterctl move takes them
		// (and the addresses they own) only with this label.
		g.Expect(crd.GetLabels()).To(HaveKey("clusterctl.cluster.x-k8s.io/move-hierarchy"))
	}
}

// moduleCRDs are the CRD names in manifests/<module>/crd.
func moduleCRDs(t *testing.T, module string) []string {
	t.Helper()
	g := NewWithT(t)
	entries, err := fs.ReadDir(manifests.FS, path.Join(module, "crd"))
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		b, err := fs.ReadFile(manifests.FS, path.Join(module, "crd", e.Name()))
		g.Expect(err).NotTo(HaveOccurred())
		nodes, err := kio.FromBytes(b)
		g.Expect(err).NotTo(HaveOccurred())
		for _, n := range nodes {
			if n.GetKind() == "CustomResourceDefinition" {
				out = append(out, n.GetName())
			}
		}
	}
	return out
}

// bundleFlags are the manager flags an overlay sets for itself.
var bundleFlags = []string{"--enable-modules=", "--leader-elect-id=", "--runtimeext-service-name=", "--runtimeext-ca-secret=", "--runtimeext-self-register", "--runtimeext-extension-config-owner=", "--inmemory-workload-"}

// sharedManagerSpec is a Deployment's pod spec without what differs by
// design between bundles: names (ServiceAccount, Secret), the provider
// label, the overlay's own flags and the docker socket.
func sharedManagerSpec(t *testing.T, d unstructured.Unstructured) map[string]any {
	t.Helper()
	g := NewWithT(t)
	pod, _, err := unstructured.NestedMap(d.Object, "spec", "template", "spec")
	g.Expect(err).NotTo(HaveOccurred())
	containers := pod["containers"].([]any)
	g.Expect(containers).To(HaveLen(1))
	container := containers[0].(map[string]any)
	delete(pod, "containers")
	delete(pod, "serviceAccountName")
	delete(pod, "volumes")
	if sc, ok := pod["securityContext"].(map[string]any); ok {
		delete(sc, "supplementalGroups") // the docker socket's group
	}
	var args []any
	for _, a := range container["args"].([]any) {
		if !slices.ContainsFunc(bundleFlags, func(f string) bool { return strings.HasPrefix(a.(string), f) }) {
			args = append(args, a)
		}
	}
	container["args"] = args
	var mounts []any
	for _, m := range container["volumeMounts"].([]any) {
		if m.(map[string]any)["name"] != "docker-socket" {
			mounts = append(mounts, m)
		}
	}
	container["volumeMounts"] = mounts
	return map[string]any{"pod": pod, "container": container}
}

// Cluster API core reads infrastructure objects through its aggregated
// ClusterRole; the infrastructure bundle (and only it) names our kinds there.
func TestInfrastructureKindsAreAggregatedToCore(t *testing.T) {
	for _, p := range bundle.Providers {
		t.Run(p.Label, func(t *testing.T) {
			g := NewWithT(t)
			var aggregated []string
			for _, role := range ofKind(rawObjects(t, componentsPath(p)), "ClusterRole") {
				if role.GetLabels()["cluster.x-k8s.io/aggregate-to-manager"] != "true" {
					continue
				}
				rules, _, err := unstructured.NestedSlice(role.Object, "rules")
				g.Expect(err).NotTo(HaveOccurred())
				for _, r := range rules {
					resources, _, _ := unstructured.NestedStringSlice(r.(map[string]any), "resources")
					aggregated = append(aggregated, resources...)
				}
			}
			if p.Type != "InfrastructureProvider" {
				g.Expect(aggregated).To(BeEmpty())
				return
			}
			g.Expect(aggregated).To(ContainElements("monolithclusters", "monolithmachines", "monolithmachinepools"))
		})
	}
}

// The manager (uid 65532) reaches a root:docker 0660 socket through its
// supplementary group: the Docker variants (and only they) add
// ${MONOLITH_DOCKER_SOCKET_GID}, an integer once clusterctl processed it.
func TestDockerSocketGroupIsSupplementary(t *testing.T) {
	for _, p := range bundle.Providers {
		t.Run(p.Label, func(t *testing.T) {
			g := NewWithT(t)
			deployments := ofKind(components(t, p, "").Objs(), "Deployment")
			g.Expect(deployments).To(HaveLen(1))
			_, found, err := unstructured.NestedSlice(deployments[0].Object, "spec", "template", "spec", "securityContext", "supplementalGroups")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(found).To(BeFalse())
			if p.Docker == nil {
				return
			}
			deployments = ofKind(dockerComponents(t, p).Objs(), "Deployment")
			g.Expect(deployments).To(HaveLen(1))
			groups, _, err := unstructured.NestedSlice(deployments[0].Object, "spec", "template", "spec", "securityContext", "supplementalGroups")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(groups).To(Equal([]any{int64(0)}))
		})
	}
}
