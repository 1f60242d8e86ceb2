package bundle_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/util/version"
	"sigs.k8s.io/yaml"

	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"

	"github.com/capi-monolith/capi-monolith/kustomize/bundle"
)

// snapshot reads every file under dir.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		files[filepath.ToSlash(rel)] = string(b)
		return err
	})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return files
}

func TestRepositoryLayout(t *testing.T) {
	g := NewWithT(t)
	files := snapshot(t, repoDir)
	var got []string
	for name := range files {
		got = append(got, name)
	}
	v := "/" + testVersion + "/"
	g.Expect(got).To(ConsistOf(
		"clusterctl.yaml",
		"clusterctl-docker.yaml",
		bundle.AllInOneFile,
		bundle.AllInOneDockerFile,
		"infrastructure-monolith"+v+"infrastructure-components.yaml",
		"infrastructure-monolith"+v+"infrastructure-components-docker.yaml",
		"infrastructure-monolith"+v+"metadata.yaml",
		"infrastructure-monolith"+v+"cluster-template.yaml",
		"infrastructure-monolith"+v+"cluster-template-development.yaml",
		"infrastructure-monolith"+v+"cluster-template-development-mp.yaml",
		"infrastructure-monolith"+v+"cluster-template-docker.yaml",
		"infrastructure-monolith"+v+"cluster-template-healthcheck.yaml",
		"infrastructure-monolith"+v+"cluster-template-ipam.yaml",
		"infrastructure-monolith"+v+"cluster-template-machinepool.yaml",
		"infrastructure-monolith"+v+"cluster-template-topology.yaml",
		"infrastructure-monolith"+v+"cluster-template-topology-taints.yaml",
		"infrastructure-monolith"+v+"cluster-template-taints.yaml",
		"infrastructure-monolith"+v+"clusterclass-monolith.yaml",
		"ipam-monolith"+v+"ipam-components.yaml",
		"ipam-monolith"+v+"metadata.yaml",
		"runtime-extension-monolith"+v+"runtime-extension-components.yaml",
		"runtime-extension-monolith"+v+"metadata.yaml",
	))

	// clusterctl.yaml lists the three providers at this folder.
	var config struct {
		Providers []struct{ Name, Type, URL string }
	}
	g.Expect(yaml.Unmarshal([]byte(files["clusterctl.yaml"]), &config)).To(Succeed())
	g.Expect(config.Providers).To(HaveLen(3))
	for i, p := range bundle.Providers {
		g.Expect(config.Providers[i].Name).To(Equal("monolith"))
		g.Expect(config.Providers[i].Type).To(Equal(p.Type))
		g.Expect(config.Providers[i].URL).To(Equal("file://" + filepath.ToSlash(filepath.Join(repoDir, p.Label, testVersion, p.ComponentsFile))))
	}
	// clusterctl-docker.yaml lists the same, with the Docker variants.
	config.Providers = nil
	g.Expect(yaml.Unmarshal([]byte(files["clusterctl-docker.yaml"]), &config)).To(Succeed())
	g.Expect(config.Providers).To(HaveLen(3))
	for i, p := range bundle.Providers {
		file := p.ComponentsFile
		if p.Docker != nil {
			file = p.Docker.ComponentsFile
		}
		g.Expect(config.Providers[i].Name).To(Equal("monolith"))
		g.Expect(config.Providers[i].Type).To(Equal(p.Type))
		g.Expect(config.Providers[i].URL).To(Equal("file://" + filepath.ToSlash(filepath.Join(repoDir, p.Label, testVersion, file))))
	}
	g.Expect(config.Providers[0].URL).To(HaveSuffix("/infrastructure-components-docker.yaml"))

	// metadata.yaml maps the release series to contract v1beta2.
	for _, p := range bundle.Providers {
		var md clusterctlv1.Metadata
		g.Expect(yaml.UnmarshalStrict([]byte(files[p.Label+v+"metadata.yaml"]), &md)).To(Succeed())
		g.Expect(md.APIVersion).To(Equal("clusterctl.cluster.x-k8s.io/v1alpha3"))
		g.Expect(md.Kind).To(Equal("Metadata"))
		series := md.GetReleaseSeriesForVersion(mustSemver(t, testVersion))
		g.Expect(series).NotTo(BeNil())
		g.Expect(series.Contract).To(Equal("v1beta2"))
	}

	// Per clusterctl's contract, ClusterClass files use no variables.
	g.Expect(files["infrastructure-monolith"+v+"clusterclass-monolith.yaml"]).NotTo(ContainSubstring("${"))
}

func TestOutputIsByteIdenticalOnRerun(t *testing.T) {
	g := NewWithT(t)
	before := snapshot(t, repoDir)
	// A file an earlier build of the version left is gone after a re-run.
	stale := filepath.Join(repoDir, "infrastructure-monolith", testVersion, "cluster-template-removed.yaml")
	g.Expect(os.WriteFile(stale, []byte("stale"), 0o644)).To(Succeed())
	g.Expect(bundle.Write(repoDir, bundle.Options{Version: testVersion})).To(Succeed())
	g.Expect(snapshot(t, repoDir)).To(Equal(before))

	first, err := bundle.Build(bundle.Options{Version: testVersion})
	g.Expect(err).NotTo(HaveOccurred())
	second, err := bundle.Build(bundle.Options{Version: testVersion})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(second).To(Equal(first))
}

func TestImageAndVersionOptions(t *testing.T) {
	g := NewWithT(t)
	repo, err := bundle.Build(bundle.Options{Version: "v1.2.3-rc.1", Image: "example.com/monolith:dev"})
	g.Expect(err).NotTo(HaveOccurred())
	for _, p := range bundle.Providers {
		c := string(repo[p.Label+"/v1.2.3-rc.1/"+p.ComponentsFile])
		g.Expect(c).To(ContainSubstring("image: ${MONOLITH_IMAGE:=example.com/monolith:dev}"))
		g.Expect(string(repo[p.Label+"/v1.2.3-rc.1/metadata.yaml"])).To(ContainSubstring("major: 1\n  minor: 2\n"))
	}
	// A local image (make image tags capi-monolith:dev) is written in the
	// canonical form clusterctl requires.
	repo, err = bundle.Build(bundle.Options{Version: "v1.2.3", Image: "capi-monolith:dev"})
	g.Expect(err).NotTo(HaveOccurred())
	for _, p := range bundle.Providers {
		g.Expect(string(repo[p.Label+"/v1.2.3/"+p.ComponentsFile])).To(ContainSubstring("image: ${MONOLITH_IMAGE:=docker.io/library/capi-monolith:dev}"))
	}
}

// TestMetadataListsEveryReleaseSeries: clusterctl upgrade from an older
// minor needs the installed series in the newest metadata.yaml.
func TestMetadataListsEveryReleaseSeries(t *testing.T) {
	for _, tc := range []struct {
		version string
		want    []string
	}{
		{"v0.1.3", []string{"v0.1.0"}},
		{"v0.2.0", []string{"v0.1.0", "v0.2.0"}},
		{"v1.0.0-rc.1", []string{"v0.1.0", "v1.0.0"}},
	} {
		t.Run(tc.version, func(t *testing.T) {
			g := NewWithT(t)
			repo, err := bundle.Build(bundle.Options{Version: tc.version})
			g.Expect(err).NotTo(HaveOccurred())
			for _, p := range bundle.Providers {
				var md clusterctlv1.Metadata
				g.Expect(yaml.UnmarshalStrict(repo[p.Label+"/"+tc.version+"/metadata.yaml"], &md)).To(Succeed())
				g.Expect(md.ReleaseSeries).To(HaveLen(len(tc.want)))
				for _, v := range tc.want {
					series := md.GetReleaseSeriesForVersion(mustSemver(t, v))
					g.Expect(series).NotTo(BeNil(), v)
					g.Expect(series.Contract).To(Equal("v1beta2"))
				}
			}
		})
	}
}

func TestCommandRejectsBadInput(t *testing.T) {
	out := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no flags", nil, "--version and --out are required"},
		{"no out", []string{"--version", "v0.1.0"}, "--version and --out are required"},
		{"version without v", []string{"--version", "0.1.0", "--out", out}, "leading v"},
		{"version not semantic", []string{"--version", "v1.2", "--out", out}, "semantic version"},
		{"image breaking the variable", []string{"--version", "v0.1.0", "--out", out, "--image", "a:${B}"}, "invalid image"},
		{"image no reference", []string{"--version", "v0.1.0", "--out", out, "--image", "Capi:dev"}, "invalid image"},
		{"unknown flag", []string{"--versoin", "v0.1.0"}, "unknown flag: --versoin"},
		{"extra argument", []string{"--version", "v0.1.0", "--out", out, "extra"}, `unexpected arguments ["extra"]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			err := bundle.Command(context.Background(), tc.args)
			g.Expect(err).To(MatchError(ContainSubstring(tc.want)))
		})
	}
	// Nothing is written when the input is bad.
	entries, err := os.ReadDir(out)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	NewWithT(t).Expect(entries).To(BeEmpty())
}

func mustSemver(t *testing.T, v string) *version.Version {
	t.Helper()
	s, err := version.ParseSemantic(v)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return s
}
