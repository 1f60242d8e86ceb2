package ipam_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/capi-monolith/capi-monolith/ipam/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/test/bench/harness/process"
)

// chaosTimeout bounds each wait of the process tests: a restart costs a
// process start and a cache sync.
const chaosTimeout = 3 * time.Minute

var (
	binaryOnce sync.Once
	binaryPath string
	binaryErr  error
)

// binary builds capi-monolith once for the process tests.
func binary(t *testing.T) string {
	t.Helper()
	binaryOnce.Do(func() {
		dir, err := os.MkdirTemp("", "capi-monolith-ipam-")
		if err != nil {
			binaryErr = err
			return
		}
		binaryPath, binaryErr = process.Build(context.Background(), dir)
	})
	NewWithT(t).Expect(binaryErr).NotTo(HaveOccurred())
	return binaryPath
}

// ipamProcess is the binary running the ipam module as its own process.
type ipamProcess struct {
	t   *testing.T
	dir string
	n   int
	p   *process.Process
}

func startProcess(t *testing.T) *ipamProcess {
	t.Helper()
	ip := &ipamProcess{t: t, dir: t.TempDir()}
	ip.start()
	t.Cleanup(func() { _ = ip.p.Stop() })
	return ip
}

func (ip *ipamProcess) start() {
	ip.t.Helper()
	ip.n++
	p, err := process.Start(context.Background(), process.Options{
		Binary: binary(ip.t), Config: env.Config, Dir: filepath.Join(ip.dir, strconv.Itoa(ip.n)),
		Args: []string{"--enable-modules=ipam", "--ipam-concurrency=10"},
	})
	NewWithT(ip.t).Expect(err).NotTo(HaveOccurred())
	ip.p = p
}

// killAndRestart sends SIGKILL (no shutdown, nothing flushed) and starts a
// fresh process.
func (ip *ipamProcess) killAndRestart() {
	ip.t.Helper()
	NewWithT(ip.t).Expect(syscall.Kill(ip.p.PID(), syscall.SIGKILL)).To(Succeed())
	_ = ip.p.Stop() // reaps it; the SIGKILL exit is expected
	ip.start()
}

// chaosClaims is the size of the kill-9 test: 2,000 claims unless
// IPAM_CHAOS_CLAIMS says otherwise.
func chaosClaims(t *testing.T) int {
	if v := os.Getenv("IPAM_CHAOS_CLAIMS"); v != "" {
		n, err := strconv.Atoi(v)
		NewWithT(t).Expect(err).NotTo(HaveOccurred(), "IPAM_CHAOS_CLAIMS")
		return n
	}
	return 2000
}

func countIn(g Gomega, ns string, list client.ObjectList, keep func(client.Object) bool) int {
	g.Expect(env.Client.List(ctx, list, client.InNamespace(ns))).To(Succeed())
	n := 0
	switch l := list.(type) {
	case *ipamv1.IPAddressList:
		for i := range l.Items {
			if keep == nil || keep(&l.Items[i]) {
				n++
			}
		}
	case *ipamv1.IPAddressClaimList:
		for i := range l.Items {
			if keep == nil || keep(&l.Items[i]) {
				n++
			}
		}
	}
	return n
}

func TestKillNineDuringAllocationAndReleaseLeavesNoDuplicateAndNoLeak(t *testing.T) {
	g := NewWithT(t)
	n := chaosClaims(t)
	const kills = 10
	ip := startProcess(t)
	ns := namespace(t)
	createPool(t, ns, "chaos", spec(20, "10.140.0.0/20"))

	// Allocation: all claims at once, five kills spread over the
	// fulfilment.
	var created sync.WaitGroup
	var claims []*ipamv1.IPAddressClaim
	created.Go(func() { claims = createClaims(t, ns, "c", "chaos", n) })
	for k := range kills / 2 {
		g.Eventually(func(g Gomega) int {
			return countIn(g, ns, &ipamv1.IPAddressList{}, nil)
		}, chaosTimeout).Should(BeNumerically(">=", (k+1)*n/(kills/2+1)))
		ip.killAndRestart()
	}
	created.Wait()
	expectDistinct(t, claims)

	// Release: half the claims deleted, five kills spread over it.
	gone, kept := claims[:n/2], claims[n/2:]
	var deleted sync.WaitGroup
	deleted.Go(func() {
		for _, c := range gone {
			if err := env.Client.Delete(ctx, c); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("failed to delete claim %s: %v", c.Name, err)
			}
		}
	})
	for k := range kills - kills/2 {
		g.Eventually(func(g Gomega) int {
			return n - countIn(g, ns, &ipamv1.IPAddressClaimList{}, nil)
		}, chaosTimeout).Should(BeNumerically(">=", (k+1)*len(gone)/(kills-kills/2+1)))
		ip.killAndRestart()
	}
	deleted.Wait()
	for _, c := range gone {
		expectGone(t, c)
	}

	// What is left: every kept claim bound to a distinct address, one
	// IPAddress and one live record each, nothing else.
	seen := expectDistinct(t, kept)
	g.Eventually(func(g Gomega) {
		addresses := &ipamv1.IPAddressList{}
		g.Expect(env.Client.List(ctx, addresses, client.InNamespace(ns))).To(Succeed())
		g.Expect(addresses.Items).To(HaveLen(len(kept)), "no leaked IPAddress")
		for _, a := range addresses.Items {
			g.Expect(seen).To(HaveKeyWithValue(a.Spec.Address, ns+"/"+a.Spec.ClaimRef.Name))
		}
		g.Expect(liveRecords(g, v1alpha1.MonolithIPPoolKind, ns, "chaos")).To(HaveLen(len(kept)), "no leaked record")
	}, chaosTimeout).Should(Succeed())
}

func TestGracePeriodSurvivesSIGKILL(t *testing.T) {
	g := NewWithT(t)
	ip := startProcess(t)
	ns := namespace(t)
	s := spec(24, "10.141.0.10")
	s.AddressReuseGracePeriodSeconds = 3600
	createPool(t, ns, "cool", s)
	first := createClaim(t, ns, "first", "cool")
	held := addressOf(t, first)
	g.Expect(env.Client.Delete(ctx, first)).To(Succeed())
	expectGone(t, held)
	expectGone(t, first)

	ip.killAndRestart()
	next := createClaim(t, ns, "second", "cool")
	expectReason(t, next, ipamv1.IPAddressClaimReadyPoolExhaustedReason)
	g.Consistently(func(g Gomega) metav1.ConditionStatus {
		status, _ := readyReason(g, next)
		return status
	}, 3*time.Second, 200*time.Millisecond).Should(Equal(metav1.ConditionFalse), "the address cools down for an hour, SIGKILL or not")
}
