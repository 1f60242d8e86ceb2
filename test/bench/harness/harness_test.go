package harness

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestTimelineCountsFromTheStartAndIgnoresRepeats(t *testing.T) {
	g := NewWithT(t)
	start := time.Unix(1000, 0)
	tl := NewTimeline(start)
	g.Expect(tl.Rate()).To(BeZero())
	g.Expect(tl.Mark("a", start.Add(1*time.Second))).To(BeTrue())
	g.Expect(tl.Mark("b", start.Add(3*time.Second))).To(BeTrue())
	g.Expect(tl.Mark("a", start.Add(5*time.Second))).To(BeFalse())
	g.Expect(tl.Mark("c", start.Add(4*time.Second))).To(BeTrue())

	g.Expect(tl.Len()).To(Equal(3))
	g.Expect(tl.Elapsed(0)).To(Equal(time.Duration(0)))
	g.Expect(tl.Elapsed(2)).To(Equal(3 * time.Second))
	g.Expect(tl.Elapsed(9)).To(Equal(4 * time.Second))
	g.Expect(tl.Window(3, 2)).To(Equal(3 * time.Second))
	g.Expect(tl.Window(3, 3)).To(Equal(4 * time.Second))
	g.Expect(tl.Rate()).To(BeNumerically("~", 0.75))
}

func TestForEachCallsEveryIndexOnce(t *testing.T) {
	g := NewWithT(t)
	var calls [100]atomic.Int32
	g.Expect(ForEach(t.Context(), len(calls), 7, func(_ context.Context, i int) error {
		calls[i].Add(1)
		return nil
	})).To(Succeed())
	for i := range calls {
		g.Expect(calls[i].Load()).To(BeEquivalentTo(1), "index %d", i)
	}
}

func TestForEachStopsAtTheFirstError(t *testing.T) {
	g := NewWithT(t)
	boom := errors.New("boom")
	const workers, failing = 4, 10
	var calls atomic.Int32
	err := ForEach(t.Context(), 1000, workers, func(ctx context.Context, i int) error {
		calls.Add(1)
		switch {
		case i == failing:
			return boom
		case i > failing:
			// Hold every later index until the failure has cancelled the run, so no worker can
			// race through the rest of the indices before the cancel lands.
			<-ctx.Done()
		}
		return nil
	})
	g.Expect(err).To(MatchError(boom))
	// The indices before the failing one, the failing one, and at most one in flight per other worker.
	g.Expect(calls.Load()).To(BeNumerically("<=", failing+1+workers-1))
}

func TestRateNamesItsSettings(t *testing.T) {
	g := NewWithT(t)
	g.Expect(Rate{QPS: 200, Burst: 400}.String()).To(Equal("qps=200 burst=400"))
	g.Expect(Unthrottled.String()).To(Equal("unthrottled"))
}

func TestRepoRootHoldsTheModule(t *testing.T) {
	g := NewWithT(t)
	root, err := RepoRoot()
	g.Expect(err).NotTo(HaveOccurred())
	_, err = os.Stat(filepath.Join(root, "manifests", "ipam", "crd"))
	g.Expect(err).NotTo(HaveOccurred())
}

func TestRequestsNameTheResourceOfEachPath(t *testing.T) {
	for _, tc := range []struct {
		method, url string
		want        RequestKind
	}{
		{"PATCH", "/apis/ipam.cluster.x-k8s.io/v1beta2/namespaces/ns/ipaddressclaims/c1/status", RequestKind{"PATCH", "ipaddressclaims/status"}},
		{"POST", "/apis/ipam.cluster.x-k8s.io/v1beta2/namespaces/ns/ipaddresses", RequestKind{"POST", "ipaddresses"}},
		{"GET", "/apis/ipam.cluster.x-k8s.io/v1beta2/namespaces/ns/ipaddresses?watch=true&resourceVersion=5", RequestKind{"WATCH", "ipaddresses"}},
		{"GET", "/apis/ipam.cluster.x-k8s.io/v1alpha1/globalmonolithippools/g1", RequestKind{"GET", "globalmonolithippools"}},
		{"POST", "/api/v1/namespaces", RequestKind{"POST", "namespaces"}},
		{"GET", "/api/v1/namespaces/ns", RequestKind{"GET", "namespaces"}},
		{"GET", "/apis", RequestKind{"GET", "/apis"}},
	} {
		t.Run(tc.method+" "+tc.url, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, "https://127.0.0.1:6443"+tc.url, nil)
			g := NewWithT(t)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(kindOf(req)).To(Equal(tc.want))
		})
	}
}

func TestParseStatCountsFieldsAfterTheCommand(t *testing.T) {
	g := NewWithT(t)
	st, err := parseStat([]byte("4242 (kube (api) server) S 17 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 12 0 77 4096 1000 18446744073709551615\n"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st).To(Equal(stat{pid: 4242, ppid: 17, comm: "kube (api) server", cpu: 3 * time.Second, rssPages: 1000}))
	_, err = parseStat([]byte("1 (x) S 0"))
	g.Expect(err).To(HaveOccurred())
}

func TestReadCPUTimesFindsThisProcess(t *testing.T) {
	g := NewWithT(t)
	c, err := ReadCPUTimes()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c).To(HaveKey(Self))
	rss, err := ReadRSS()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rss[Self]).To(BeNumerically(">", 0))
	g.Expect(CPUTimes{"a": time.Second, "b": 3 * time.Second}.Sub(CPUTimes{"a": time.Second}).Cores(2 * time.Second)).
		To(Equal("b 1.50, a 0.00"))
}

func TestIntsAndFloatsTakeCommaSeparatedPositives(t *testing.T) {
	g := NewWithT(t)
	var n Ints
	g.Expect(n.Set("100, 1000,5000")).To(Succeed())
	g.Expect(n).To(Equal(Ints{100, 1000, 5000}))
	g.Expect(n.String()).To(Equal("100,1000,5000"))
	g.Expect(n.Set("10,0")).To(MatchError(ContainSubstring(`"0"`)))
	g.Expect(n.Set("ten")).To(HaveOccurred())

	var f Floats
	g.Expect(f.Set("100,2.5")).To(Succeed())
	g.Expect(f).To(Equal(Floats{100, 2.5}))
	g.Expect(f.String()).To(Equal("100,2.5"))
	g.Expect(f.Set("-1")).To(HaveOccurred())
}
