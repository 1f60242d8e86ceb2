package bootstrap_test

import (
	"testing"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/capi-monolith/capi-monolith/manifests"
)

// Data only gets Secrets (they bypass the cache): infra, whose one
// MonolithMachine controller runs it for every machine, may get Secrets,
// never watch them, so no informer holds every Secret of every namespace.
// Its other Secret verbs are the inMemory workload state's
// (--inmemory-workload-state=secrets, secretjournal): an uncached client
// that creates, updates and deletes the state Secrets of one cluster and
// lists them in that cluster's namespace by label. machinepool, which only
// names the Secret through its owner adapter, needs no access at all.
func TestTheModulesReadingBootstrapDataNeverWatchSecrets(t *testing.T) {
	want := map[string][]string{"infra": {"get", "create", "update", "delete", "list"}, "machinepool": nil}
	for module, wantVerbs := range want {
		t.Run(module, func(t *testing.T) {
			g := NewWithT(t)
			data, err := manifests.FS.ReadFile(module + "/rbac/role.yaml")
			g.Expect(err).NotTo(HaveOccurred())
			role := &rbacv1.ClusterRole{}
			g.Expect(yaml.Unmarshal(data, role)).To(Succeed())
			var verbs []string
			for _, rule := range role.Rules {
				for _, res := range rule.Resources {
					if res == "secrets" && (len(rule.APIGroups) == 0 || rule.APIGroups[0] == "") {
						verbs = append(verbs, rule.Verbs...)
					}
				}
			}
			if wantVerbs == nil {
				g.Expect(verbs).To(BeEmpty())
				return
			}
			g.Expect(verbs).To(ConsistOf(wantVerbs))
		})
	}
}
