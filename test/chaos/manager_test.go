package chaos

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/capi-monolith/capi-monolith/dev/certs"
	"github.com/capi-monolith/capi-monolith/dev/ports"
	"github.com/capi-monolith/capi-monolith/test/bench/harness/process"
)

// modules are what every run's manager runs, in one process: the runtime
// extension serves its hooks over HTTPS on the manager's webhook server.
const modules = "infra,machinepool,ipam,runtimeext"

// The runs' workload API ports: a random block of workloadPortsBlock in
// [workloadPortsFrom, workloadPortsTo), above the default range
// (20000-23999) and below Linux's ephemeral ports (32768 on).
const (
	workloadPortsFrom  = 24000
	workloadPortsTo    = 32000
	workloadPortsBlock = 100
)

// manager is capi-monolith running as its own process, started again after
// each kill. Its webhook server (the runtime extension's hook server)
// keeps one loopback address and one certificate across restarts, so that
// the ExtensionConfig registered once stays valid, as a Service and a
// certificate Secret keep it valid across a provider Pod's restarts.
type manager struct {
	t      *testing.T
	binary string
	dir    string
	args   []string
	starts int
	p      *process.Process
	// token reads the diagnostics endpoint's /debug/pprof/*.
	token string
	// webhookURL and webhookCA are the hook server's address and the CA
	// of its serving certificate, for the ExtensionConfig.
	webhookURL string
	webhookCA  []byte
}

// startManager builds the binary and starts it with extra flags after the
// suite's; the test's cleanup stops it.
func startManager(t *testing.T, extra ...string) *manager {
	t.Helper()
	g := NewWithT(t)
	binary, err := process.Build(t.Context(), t.TempDir())
	g.Expect(err).NotTo(HaveOccurred())
	token, err := process.GrantDiagnostics(t.Context(), env.Config)
	g.Expect(err).NotTo(HaveOccurred())
	m := &manager{t: t, binary: binary, dir: t.TempDir(), token: token}

	ca, err := certs.NewCA("capi-monolith-chaos")
	g.Expect(err).NotTo(HaveOccurred())
	pair, err := ca.Serving()
	g.Expect(err).NotTo(HaveOccurred())
	certDir := filepath.Join(m.dir, "webhook-certs")
	g.Expect(pair.Write(certDir, ca)).To(Succeed())
	port, err := ports.One()
	g.Expect(err).NotTo(HaveOccurred())
	m.webhookURL = fmt.Sprintf("https://127.0.0.1:%d", port)
	m.webhookCA = ca.PEM
	// A block of workload API ports of the run's own, out of the default
	// range that `capi-monolith dev` and other suites on the host take
	// from: a port a paused cluster recorded is free while no manager
	// serves it, and another process there could take it.
	first := workloadPortsFrom + workloadPortsBlock*rand.N((workloadPortsTo-workloadPortsFrom)/workloadPortsBlock)
	// After process.Start's own flags: the last of a repeated flag wins.
	m.args = append([]string{
		"--enable-modules=" + modules,
		"--webhook-host=127.0.0.1",
		fmt.Sprintf("--webhook-port=%d", port),
		"--webhook-cert-dir=" + certDir,
		fmt.Sprintf("--inmemory-workload-port-range=%d-%d", first, first+workloadPortsBlock-1),
	}, extra...)

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
		Args:   m.args,
		// The diagnostics endpoint (metrics and pprof) listens on a
		// loopback port and answers this token only.
		DiagnosticsToken: m.token,
	})
	NewWithT(m.t).Expect(err).NotTo(HaveOccurred(), "restart %d", m.starts-1)
	m.p = p
}

// kill is the SIGKILL fault: nothing flushed, no shutdown hook runs; the
// process is reaped and a fresh one started.
func (m *manager) kill() *fault {
	return &fault{name: "SIGKILL of the manager", do: m.killAndRestart}
}

func (m *manager) killAndRestart() {
	m.t.Helper()
	NewWithT(m.t).Expect(syscall.Kill(m.p.PID(), syscall.SIGKILL)).To(Succeed())
	_ = m.p.Stop() // reaps it; the SIGKILL exit is expected
	m.start()
}

// goroutines reads the number of goroutines of the running process from
// its pprof endpoint (/debug/pprof/goroutine?debug=1, first line
// "goroutine profile: total N").
func (m *manager) goroutines(ctx context.Context) (int, error) {
	path := filepath.Join(m.dir, "goroutines.txt")
	if err := m.p.SaveProfile(ctx, "goroutine?debug=1", path); err != nil {
		return 0, err
	}
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("failed to read the goroutine profile: %w", err)
	}
	defer f.Close()
	line, err := bufio.NewReader(f).ReadString('\n')
	if err != nil {
		return 0, fmt.Errorf("failed to read the goroutine profile: %w", err)
	}
	var n int
	if _, err := fmt.Sscanf(strings.TrimSpace(line), "goroutine profile: total %d", &n); err != nil {
		return 0, fmt.Errorf("unexpected goroutine profile header %q: %w", line, err)
	}
	return n, nil
}

// goroutineDump returns the goroutine profile grouped by stack (debug=1),
// for the failure message of a leak.
func (m *manager) goroutineDump(ctx context.Context) string {
	path := filepath.Join(m.dir, "goroutines.txt")
	if err := m.p.SaveProfile(ctx, "goroutine?debug=1", path); err != nil {
		return err.Error()
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	return string(data)
}

// goroutineTolerance is how many goroutines above its baseline a manager
// with nothing to do may run: informers started on first use (a kind first
// read by a reconcile) and the apiserver connections of the moment. A leak
// of one goroutine per cluster, machine or address of a run exceeds it.
const goroutineTolerance = 25

// goroutineSettle bounds the wait for the count to come down: goroutines
// of finished work (a request's, a requeue timer's) end within seconds,
// idle HTTP connections within their 90 s idle timeout.
const goroutineSettle = 2 * time.Minute

// steadyGoroutines reads the manager's goroutine count until two reads a
// second apart agree: the count of a started manager with nothing to do.
func (m *manager) steadyGoroutines(ctx context.Context, g Gomega) int {
	last := -1
	var n int
	g.Eventually(func(g Gomega) {
		var err error
		n, err = m.goroutines(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		prev := last
		last = n
		g.Expect(n).To(Equal(prev), "goroutine count still moving")
	}).WithTimeout(goroutineSettle).WithPolling(time.Second).Should(Succeed())
	return n
}

// expectGoroutinesBackToBaseline waits until the running manager's
// goroutine count is within goroutineTolerance of baseline and returns it;
// it fails with the goroutine profile when the count stays above.
func expectGoroutinesBackToBaseline(ctx context.Context, g Gomega, m *manager, baseline int) int {
	var n int
	g.Eventually(func(g Gomega) {
		var err error
		n, err = m.goroutines(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(n).To(BeNumerically("<=", baseline+goroutineTolerance), "goroutines after every cluster was deleted (baseline %d)", baseline)
	}).WithTimeout(goroutineSettle).WithPolling(time.Second).Should(Succeed(), func() string {
		return "goroutine leak; the manager's goroutines:\n" + m.goroutineDump(ctx)
	})
	return n
}
