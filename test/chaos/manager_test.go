//go:build chaos

package chaos

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/capi-monolith/capi-monolith/test/bench/harness/process"
)

// managerArgs run the modules the suite exercises in one process.
var managerArgs = []string{"--enable-modules=infra,machinepool,ipam"}

// manager is capi-monolith running as its own process, started again after
// each kill.
type manager struct {
	t      *testing.T
	binary string
	dir    string
	starts int
	kills  int
	// inFlight counts the kills that landed while work was pending
	// (pending reports some): the suite's evidence that the kills hit
	// the manager mid-flow, not between flows.
	inFlight int
	pending  func() int
	p        *process.Process
}

// startManager builds the binary and starts it; the test's cleanup stops it.
func startManager(t *testing.T) *manager {
	t.Helper()
	binary, err := process.Build(t.Context(), t.TempDir())
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	m := &manager{t: t, binary: binary, dir: t.TempDir()}
	m.start()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("capi-monolith's last output:\n%s", m.p.Log())
		}
		_ = m.p.Stop()
	})
	return m
}

// start runs a new process and waits until it is ready (process.Start
// bounds the wait).
func (m *manager) start() {
	m.t.Helper()
	m.starts++
	p, err := process.Start(context.Background(), process.Options{
		Binary: m.binary,
		Config: env.Config,
		Dir:    filepath.Join(m.dir, strconv.Itoa(m.starts)),
		Args:   managerArgs,
	})
	NewWithT(m.t).Expect(err).NotTo(HaveOccurred(), "restart %d", m.starts-1)
	m.p = p
}

// killAndRestart sends SIGKILL (nothing flushed, no shutdown hook runs),
// reaps the process and starts a fresh one.
func (m *manager) killAndRestart() {
	m.t.Helper()
	NewWithT(m.t).Expect(syscall.Kill(m.p.PID(), syscall.SIGKILL)).To(Succeed())
	_ = m.p.Stop() // reaps it; the SIGKILL exit is expected
	m.kills++
	m.start()
}

// killAfterRandomDelay lets the manager run for a random 0.3–2.5 s, so that
// the kill lands at a random point of whatever it is doing (a reconcile, a
// status patch, a cache sync), then kills and restarts it. The delay picks
// the kill point; nothing waits on it for a result.
func (m *manager) killAfterRandomDelay() {
	m.t.Helper()
	delay := 300*time.Millisecond + rand.N(2200*time.Millisecond)
	select {
	case <-time.After(delay):
	case <-m.t.Context().Done():
		return
	}
	if m.pending != nil && m.pending() > 0 {
		m.inFlight++
	}
	m.killAndRestart()
}
