package capimodule

import (
	"testing"

	. "github.com/onsi/gomega"
)

func TestLocateFindsThePinnedModuleAndItsManifests(t *testing.T) {
	g := NewWithT(t)
	m, err := Locate()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(m.Path).To(Equal(Path))
	g.Expect(m.Version).To(Equal("v1.14.2"), "the version go.mod pins")
	for _, c := range []Component{Core, KubeadmBootstrap, KubeadmControlPlane} {
		g.Expect(m.ComponentCRDDirectory(c)).To(BeADirectory(), string(c))
		g.Expect(m.ComponentWebhookManifests(c)).To(BeARegularFile(), string(c))
	}
	g.Expect(m.CRDDirectory()).To(Equal(m.ComponentCRDDirectory(Core)))
	g.Expect(m.WebhookManifests()).To(Equal(m.ComponentWebhookManifests(Core)))
}

func TestBuildInfoAndModuleCacheAgreeWithGoList(t *testing.T) {
	g := NewWithT(t)
	listed, err := goListModule(Path)
	g.Expect(err).NotTo(HaveOccurred())
	if m, ok := fromBuildInfo(); ok {
		dir, err := moduleCacheDir(m.Path, m.Version)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(dir).To(Equal(listed.Dir))
	}
}

func TestEscapeUsesTheModuleCacheCaseEncoding(t *testing.T) {
	g := NewWithT(t)
	g.Expect(escape("github.com/Azure/go-Autorest")).To(Equal("github.com/!azure/go-!autorest"))
	g.Expect(escape("sigs.k8s.io/cluster-api")).To(Equal("sigs.k8s.io/cluster-api"))
}

func TestAMissingModuleNamesTheDownloadCommand(t *testing.T) {
	g := NewWithT(t)
	t.Setenv("GOMODCACHE", t.TempDir())
	_, err := moduleCacheDir(Path, "v1.14.2")
	g.Expect(err).To(MatchError(ContainSubstring("go mod download sigs.k8s.io/cluster-api@v1.14.2")))
}
