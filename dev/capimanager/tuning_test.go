package capimanager_test

import (
	"os/exec"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/capi-monolith/capi-monolith/dev/capimanager"
	"github.com/capi-monolith/capi-monolith/dev/capimodule"
)

func TestAZeroTuningAddsNoFlag(t *testing.T) {
	g := NewWithT(t)
	for _, m := range capimanager.All() {
		g.Expect(capimanager.Tuning{}.Args(m)).To(BeEmpty(), m.Name)
	}
}

func TestTuningSetsEachManagersOwnFlags(t *testing.T) {
	g := NewWithT(t)
	tuning := capimanager.Tuning{KubeAPIQPS: 150.5, KubeAPIBurst: 300, ClusterCacheClientQPS: 40, ClusterCacheClientBurst: 60, Concurrency: 25, SyncPeriod: 30 * time.Minute}
	common := []string{"--kube-api-qps=150.5", "--kube-api-burst=300", "--clustercache-client-qps=40", "--clustercache-client-burst=60", "--sync-period=30m0s"}
	g.Expect(tuning.Args(capimanager.KubeadmControlPlane)).To(ConsistOf(append(common,
		"--clustercache-concurrency=25", "--kubeadmcontrolplane-concurrency=25")))
	g.Expect(tuning.Args(capimanager.KubeadmBootstrap)).To(ConsistOf(append(common,
		"--clustercache-concurrency=25", "--kubeadmconfig-concurrency=25")))
	g.Expect(tuning.Args(capimanager.Core)).To(ContainElements("--machine-concurrency=25", "--machineset-concurrency=25", "--cluster-concurrency=25"))
}

func TestNegativeTuningIsRefusedNamingEveryFlag(t *testing.T) {
	g := NewWithT(t)
	err := capimanager.Tuning{KubeAPIQPS: -1, Concurrency: -2, SyncPeriod: -time.Second}.Validate()
	g.Expect(err).To(MatchError(ContainSubstring("--capi-kube-api-qps must not be negative")))
	g.Expect(err).To(MatchError(ContainSubstring("--capi-concurrency must not be negative")))
	g.Expect(err).To(MatchError(ContainSubstring("--capi-sync-period must not be negative")))
	g.Expect(capimanager.Tuning{KubeAPIQPS: 1}.Validate()).To(Succeed())
}

// Every flag Tuning sets is one the pinned release's manager knows: the
// real binary parses them and exits 0 on the --help that follows (an
// unknown flag makes it exit 2 first).
func TestEveryTuningFlagIsKnownToItsManager(t *testing.T) {
	capi, err := capimodule.Locate()
	if err != nil {
		t.Fatal(err)
	}
	tuning := capimanager.Tuning{KubeAPIQPS: 150, KubeAPIBurst: 300, ClusterCacheClientQPS: 40, ClusterCacheClientBurst: 60, Concurrency: 25, SyncPeriod: time.Hour}
	for _, m := range capimanager.All() {
		t.Run(m.Name, func(t *testing.T) {
			g := NewWithT(t)
			binary, err := m.Find("", "", capi.Version)
			g.Expect(err).NotTo(HaveOccurred())
			out, err := exec.CommandContext(t.Context(), binary, append(tuning.Args(m), "--help")...).CombinedOutput()
			g.Expect(err).NotTo(HaveOccurred(), "%s", out)
		})
	}
}
