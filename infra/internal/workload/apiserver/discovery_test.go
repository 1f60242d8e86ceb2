package apiserver

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
	"github.com/capi-monolith/capi-monolith/test/envtest"
)

// discoveryExceptions are the built-in resources whose discovery differs
// from kube-apiserver's, each with its reason; docs/workload-api.md lists
// the same. There are none: every group, version, resource, kind, verb,
// scope, short name, category and subresource is kube-apiserver's.
var discoveryExceptions = map[string]string{}

// managementConfig is the admin config of the management kube-apiserver
// (envtest v1.36.3 with Cluster API's CRDs), started once for the package.
func managementConfig(t *testing.T) *rest.Config {
	t.Helper()
	management.once.Do(func() {
		management.env, management.err = envtest.Start(context.Background(), envtest.Options{})
	})
	if management.err != nil {
		t.Fatal(management.err)
	}
	return rest.CopyConfig(management.env.Config)
}

// customGroups are the groups the management cluster's CRDs serve.
func customGroups(t *testing.T, g Gomega) map[string]bool {
	managementConfig(t)
	crds := &apiextensionsv1.CustomResourceDefinitionList{}
	g.Expect(management.env.Client.List(context.Background(), crds)).To(Succeed())
	out := map[string]bool{}
	for _, crd := range crds.Items {
		out[crd.Spec.Group] = true
	}
	return out
}

func aggregatedOf(g Gomega, rc rest.Interface, path string, skip map[string]bool) []apidiscoveryv2.APIGroupDiscovery {
	body, err := rc.Get().AbsPath(path).SetHeader("Accept", aggregatedContentType).Do(context.Background()).Raw()
	g.Expect(err).NotTo(HaveOccurred())
	list := &apidiscoveryv2.APIGroupDiscoveryList{}
	g.Expect(json.Unmarshal(body, list)).To(Succeed())
	var out []apidiscoveryv2.APIGroupDiscovery
	for _, grp := range list.Items {
		if skip[grp.Name] {
			continue
		}
		for i := range grp.Versions {
			var kept []apidiscoveryv2.APIResourceDiscovery
			for _, r := range grp.Versions[i].Resources {
				if _, ok := discoveryExceptions[schema.GroupResource{Group: grp.Name, Resource: r.Resource}.String()]; !ok {
					kept = append(kept, r)
				}
			}
			grp.Versions[i].Resources = kept
		}
		out = append(out, grp)
	}
	return out
}

func TestBuiltinDiscoveryIsKubeAPIServers(t *testing.T) {
	g := NewWithT(t)
	kas, err := discovery.NewDiscoveryClientForConfig(managementConfig(t))
	g.Expect(err).NotTo(HaveOccurred())
	custom := customGroups(t, g)
	ts := startServer(t, store.Options{}, "c1")
	ours, err := discovery.NewDiscoveryClientForConfig(ts.restConfig(t, "c1"))
	g.Expect(err).NotTo(HaveOccurred())

	// Aggregated discovery (kubectl's and client-go's): the groups in
	// order, their versions in order, every resource with its kind, verbs,
	// scope, short names, categories and subresources.
	for _, path := range []string{"/api", "/apis"} {
		want := aggregatedOf(g, kas.RESTClient(), path, custom)
		got := aggregatedOf(g, ours.RESTClient(), path, nil)
		g.Expect(got).To(Equal(want), path)
	}

	// The documents per group version (older clients), with the storage
	// version hashes, and the group list with preferred versions.
	wantGroups, err := kas.ServerGroups()
	g.Expect(err).NotTo(HaveOccurred())
	wantGroups.Groups = slices.DeleteFunc(wantGroups.Groups, func(grp metav1.APIGroup) bool { return custom[grp.Name] })
	gotGroups, err := ours.ServerGroups()
	g.Expect(err).NotTo(HaveOccurred())
	for i := range wantGroups.Groups {
		wantGroups.Groups[i].ServerAddressByClientCIDRs = nil
	}
	for i := range gotGroups.Groups {
		gotGroups.Groups[i].ServerAddressByClientCIDRs = nil
	}
	g.Expect(gotGroups.Groups).To(Equal(wantGroups.Groups))
	for _, grp := range wantGroups.Groups {
		for _, v := range grp.Versions {
			want, err := kas.ServerResourcesForGroupVersion(v.GroupVersion)
			g.Expect(err).NotTo(HaveOccurred())
			got, err := ours.ServerResourcesForGroupVersion(v.GroupVersion)
			g.Expect(err).NotTo(HaveOccurred(), v.GroupVersion)
			g.Expect(got.APIResources).To(Equal(want.APIResources), v.GroupVersion)
		}
	}
}

func TestRESTMapperMapsEveryBuiltinKind(t *testing.T) {
	g := NewWithT(t)
	ts := startServer(t, store.Options{}, "c1")
	dc, err := discovery.NewDiscoveryClientForConfig(ts.restConfig(t, "c1"))
	g.Expect(err).NotTo(HaveOccurred())
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	shortNames := restmapper.NewShortcutExpander(mapper, dc, nil)
	for _, r := range builtinResources {
		m, err := mapper.RESTMapping(r.gvk().GroupKind(), r.gv.Version)
		g.Expect(err).NotTo(HaveOccurred(), r.gvk().String())
		g.Expect(m.Resource).To(Equal(r.gv.WithResource(r.name)))
		wantScope := "root"
		if r.namespaced {
			wantScope = "namespace"
		}
		g.Expect(string(m.Scope.Name())).To(Equal(wantScope), r.gvk().String())
		for _, short := range r.shortNames {
			full, err := shortNames.ResourceFor(schema.GroupVersionResource{Resource: short})
			g.Expect(err).NotTo(HaveOccurred(), short)
			g.Expect(full.Resource).To(Equal(r.name), short)
		}
	}
}

// kubeconfigOfManagement writes the management kube-apiserver's admin
// kubeconfig for kubectl.
func kubeconfigOfManagement(t *testing.T) string {
	managementConfig(t)
	path := filepath.Join(t.TempDir(), "management.kubeconfig")
	if err := management.env.WriteKubeconfig(path); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestKubectlAPIResourcesIsKubeAPIServers(t *testing.T) {
	g := NewWithT(t)
	custom := customGroups(t, g)
	ts := startServer(t, store.Options{}, "c1")
	_, kubectl := kubectlFor(t, ts, "c1")
	got, err := kubectl("api-resources", "--no-headers")
	g.Expect(err).NotTo(HaveOccurred(), got)

	cmd := exec.Command(kubectlPath, "--kubeconfig", kubeconfigOfManagement(t), "--cache-dir", t.TempDir(), "api-resources", "--no-headers")
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(out))
	var want []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		// NAME SHORTNAMES APIVERSION NAMESPACED KIND: the group is in the
		// API version.
		builtin := true
		for group := range custom {
			if strings.Contains(line, " "+group+"/") {
				builtin = false
			}
		}
		if builtin {
			want = append(want, strings.Join(strings.Fields(line), " "))
		}
	}
	var gotLines []string
	for _, line := range strings.Split(strings.TrimSpace(got), "\n") {
		gotLines = append(gotLines, strings.Join(strings.Fields(line), " "))
	}
	g.Expect(gotLines).To(Equal(want))
	g.Expect(len(gotLines)).To(BeNumerically(">", 50))
}
