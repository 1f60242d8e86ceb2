package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// The side-by-side mode itself needs the peer's source, which a fresh clone
// has not; its pure parts are tested here and the mode is run by hand
// (docs/benchmarks.md).

func TestPeerSourceSelectsTheSideBySideModeWithItsOwnDefaults(t *testing.T) {
	g := NewWithT(t)
	o, err := parseFlags([]string{"-peer-source", "/some/dir"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.peerSource).To(Equal("/some/dir"))
	g.Expect(o.sbs.Sizes).To(Equal([]int{1000, 5000}))
	g.Expect(o.sbs.Runs).To(Equal(1))
	g.Expect(o.sbs.Marginal).To(Equal(1000))
	g.Expect(o.out).To(Equal(defaultSBSOut))

	o, err = parseFlags([]string{"-peer-source", "/some/dir", "-n", "2000", "-runs", "3", "-marginal", "0", "-out", ""})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.sbs.Sizes).To(Equal([]int{2000}))
	g.Expect(o.sbs.Runs).To(Equal(3))
	g.Expect(o.sbs.Marginal).To(BeZero())
	g.Expect(o.out).To(BeEmpty())
}

func TestSideBySideModeRefusesFlagsThatWouldChangeASidesDefaults(t *testing.T) {
	for _, args := range [][]string{
		{"-peer-source", "/x", "-qps", "50"},
		{"-peer-source", "/x", "-burst", "50"},
		{"-peer-source", "/x", "-concurrency", "2"},
		{"-peer-source", "/x", "-n", "60000"}, // with the 1,000 marginal claims, more than a /16
		{"-marginal", "10"},                   // without -peer-source
	} {
		_, err := parseFlags(args)
		NewWithT(t).Expect(err).To(HaveOccurred(), "%v", args)
	}
}

func TestPlainFolderPeerSourceIsCopiedAndHasNoCommit(t *testing.T) {
	g := NewWithT(t)
	src := t.TempDir()
	g.Expect(os.WriteFile(filepath.Join(src, "go.mod"), []byte("module example.com/peer\n"), 0o600)).To(Succeed())
	s, err := resolvePeerSource(t.Context(), src)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.GitDir).To(BeEmpty())
	g.Expect(s.Commit(t.Context())).To(Equal("not a git directory"))
	dst := filepath.Join(t.TempDir(), "src")
	g.Expect(s.Extract(t.Context(), dst)).To(Succeed())
	g.Expect(filepath.Join(dst, "go.mod")).To(BeAnExistingFile())

	_, err = resolvePeerSource(t.Context(), t.TempDir())
	g.Expect(err).To(MatchError(ContainSubstring("neither a git directory nor a folder with a go.mod")))
}

func TestSideBySideResultsPutThePeerBesideUs(t *testing.T) {
	g := NewWithT(t)
	phase := func(rate float64) Phase {
		return Phase{Claims: 1000, Rate: rate, Wall: time.Duration(1000/rate) * time.Second,
			APIServerCPU: 20 * time.Second, ControllerCPU: 5 * time.Second, Writes: 4}
	}
	m1, m2 := phase(30), phase(5)
	r := &SBSResults{
		Config:     SBSConfig{Sizes: []int{1000}, Runs: 1, Marginal: 1000, RawObjects: 2000, CreateWorkers: 16},
		PeerCommit: "abc", PeerSrc: "/peer",
		Runs: []SBSRun{
			{Side: sideOurs, N: 1000, RawUnthrottled: 400, Empty: phase(40), Marginal: &m1, Addresses: 2000},
			{Side: sidePeer, N: 1000, RawUnthrottled: 400, Empty: phase(20), Marginal: &m2, Addresses: 2000},
		},
	}
	var md strings.Builder
	g.Expect(r.WriteMarkdown(&md, "go run ./test/bench/ipam -peer-source /peer")).To(Succeed())
	g.Expect(md.String()).To(ContainSubstring("| 1000 from an empty /16 | 1 | 40.0 | 20.0 | 2.00× | 20.0 | 20.0 |"))
	g.Expect(md.String()).To(ContainSubstring("| 1000 more into a pool holding 1000 | 1 | 30.0 | 5.0 | 6.00× |"))
	g.Expect(md.String()).To(ContainSubstring("abc (HEAD of /peer)"))
	g.Expect(r.Problems()).To(BeEmpty())
	var text strings.Builder
	g.Expect(r.WriteText(&text)).To(Succeed())
	g.Expect(text.String()).To(ContainSubstring("in-cluster"))
}

// A side whose marginal claims are not all fulfilled within
// -marginal-timeout is written with how many it fulfilled, and the ratio
// says it is a bound; the other side's figures stay.
func TestAMarginalPhaseCutShortIsABoundNotAFailure(t *testing.T) {
	g := NewWithT(t)
	o, err := parseFlags([]string{"-peer-source", "/x", "-marginal-timeout", "5m"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.sbs.MarginalTimeout).To(Equal(5 * time.Minute))
	o, err = parseFlags([]string{"-peer-source", "/x"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.sbs.MarginalTimeout).To(Equal(15*time.Minute), "bounded by default")
	_, err = parseFlags([]string{"-marginal-timeout", "5m"})
	g.Expect(err).To(MatchError(ContainSubstring("side-by-side mode only")))
	_, err = parseFlags([]string{"-peer-source", "/x", "-marginal-timeout", "-1s"})
	g.Expect(err).To(HaveOccurred())

	full := Phase{Claims: 1000, Rate: 50, Wall: 20 * time.Second, Fulfilled: 1000}
	none := Phase{Claims: 1000, Wall: 5 * time.Minute, TimedOut: true}
	some := Phase{Claims: 1000, Rate: 1, Wall: 5 * time.Minute, TimedOut: true, Fulfilled: 300}
	r := &SBSResults{
		Config: SBSConfig{Sizes: []int{1000}, Runs: 1, Marginal: 1000, MarginalTimeout: 5 * time.Minute, RawObjects: 2000, CreateWorkers: 16},
		Runs: []SBSRun{
			{Side: sideOurs, N: 1000, RawUnthrottled: 400, Empty: full, Marginal: &full},
			{Side: sidePeer, N: 1000, RawUnthrottled: 400, Empty: full, Marginal: &none, Problems: []string{"0 of 1000 more claims fulfilled within 5m0s"}},
		},
	}
	var md strings.Builder
	g.Expect(r.WriteMarkdown(&md, "go run ./test/bench/ipam -peer-source /peer")).To(Succeed())
	g.Expect(md.String()).To(ContainSubstring("| 1000 more into a pool holding 1000 | 1 | 50.0 | 0.0 (timed out: 0 of 1000 fulfilled within 300.00 s) | ∞ (the peer fulfilled none) |"))
	g.Expect(md.String()).To(ContainSubstring("0 of 1000 fulfilled, timed out"))
	g.Expect(md.String()).To(ContainSubstring("for at most 5m0s"))

	r.Runs[1].Marginal = &some
	md.Reset()
	g.Expect(r.WriteMarkdown(&md, "go run ./test/bench/ipam -peer-source /peer")).To(Succeed())
	g.Expect(md.String()).To(ContainSubstring("| 50.0 | 1.0 (timed out: 300 of 1000 fulfilled within 300.00 s) | ≥ 50.00× |"))
}

func TestRestartFlagWritesItsOwnFileAndCountsTheClaimsItAdds(t *testing.T) {
	g := NewWithT(t)
	o, err := parseFlags([]string{"-peer-source", "/x", "-restart", "-sides", sideOurs, "-n", "20000", "-marginal", "0"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.out).To(Equal(defaultRestartOut))
	g.Expect(o.sbs.Sides).To(Equal([]string{sideOurs}))
	g.Expect(o.sbs.runs(sidePeer)).To(BeFalse())
	for _, args := range [][]string{
		{"-peer-source", "/x", "-restart", "-n", "30000"}, // 2N + 1,000 + 1 claims: more than a /16 holds
		{"-peer-source", "/x", "-sides", "mine"},
		{"-restart"}, // without -peer-source
	} {
		_, err := parseFlags(args)
		g.Expect(err).To(HaveOccurred(), "%v", args)
	}
}

func TestRestartResultsListTheRestartAndTheTakeOver(t *testing.T) {
	g := NewWithT(t)
	r := &SBSResults{
		Config: SBSConfig{Sizes: []int{1000}, Runs: 1, RawObjects: 2000, CreateWorkers: 16, Restart: true},
		Runs: []SBSRun{{
			Side: sideOurs, N: 1000, RawUnthrottled: 400, Addresses: 2001,
			Empty:    Phase{Claims: 1000, Rate: 40, Wall: 25 * time.Second},
			Restart:  &Restart{Bound: 1000, Ready: time.Second, NewClaim: 2 * time.Second, Backlog: 3 * time.Second, Writes: 4, Stopped: "on SIGTERM"},
			TakeOver: &TakeOver{Claims: 1000, Fill: 1001, Wall: 20 * time.Second, Writes: 4, Stopped: "killed 30s after SIGTERM"},
		}},
	}
	var md strings.Builder
	g.Expect(r.WriteMarkdown(&md, "go run ./test/bench/ipam -restart")).To(Succeed())
	g.Expect(md.String()).To(ContainSubstring("## Restart and take-over"))
	g.Expect(md.String()).To(ContainSubstring("| 1 | capi-monolith | 1000 | on SIGTERM | 1.00 | 2.00 | 3.00 | 4 |"))
	g.Expect(md.String()).To(ContainSubstring("| 1000 | killed 30s after SIGTERM | 1001 | 0.00 | 20.00 | 50.0 | 4.00 |"))
}
