package toolcache_test

import (
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/capi-monolith/capi-monolith/dev/toolcache"
)

func TestDirFollowsTheMakefilesRule(t *testing.T) {
	g := NewWithT(t)
	t.Setenv("CAPI_MONOLITH_CACHE", "")
	t.Setenv("XDG_CACHE_HOME", "/xdg")
	g.Expect(toolcache.Dir()).To(Equal("/xdg/capi-monolith"))
	t.Setenv("CAPI_MONOLITH_CACHE", "/mine")
	g.Expect(toolcache.Dir()).To(Equal("/mine"))
}

func TestFindPrefersGivenThenTheEnvironmentThenTheCache(t *testing.T) {
	g := NewWithT(t)
	cache := t.TempDir()
	b := toolcache.Binary{Title: "tool", Folder: "tool", File: "tool", EnvVar: "TOOLCACHE_TEST_TOOL", MakeTarget: "tool"}
	cached := b.Path(cache, "v1.2.3")
	g.Expect(cached).To(Equal(filepath.Join(cache, "tool", "v1.2.3", "tool")))
	t.Setenv(b.EnvVar, "")

	_, err := b.Find("", cache, "v1.2.3")
	g.Expect(err).To(MatchError(ContainSubstring("run `make tool` or set TOOLCACHE_TEST_TOOL")))

	g.Expect(os.MkdirAll(filepath.Dir(cached), 0o755)).To(Succeed())
	g.Expect(os.WriteFile(cached, nil, 0o644)).To(Succeed())
	_, err = b.Find("", cache, "v1.2.3")
	g.Expect(err).To(MatchError(ContainSubstring("not an executable file")))

	g.Expect(os.Chmod(cached, 0o755)).To(Succeed())
	g.Expect(b.Find("", cache, "v1.2.3")).To(Equal(cached))

	other := filepath.Join(t.TempDir(), "other")
	g.Expect(os.WriteFile(other, nil, 0o755)).To(Succeed())
	t.Setenv(b.EnvVar, other)
	g.Expect(b.Find("", cache, "v1.2.3")).To(Equal(other))
	g.Expect(b.Find(cached, cache, "v1.2.3")).To(Equal(cached))
}
