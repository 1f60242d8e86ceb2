package procgroup_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/capi-monolith/capi-monolith/dev/procgroup"
)

// A process that dies after Ready is started again, Restarts times, each
// death reported to OnExit; then the Supervisor gives up with the last
// exit error.
func TestSupervisorRestartsAReadyProcessThenGivesUp(t *testing.T) {
	g := NewWithT(t)
	die := filepath.Join(t.TempDir(), "die")
	var starts, exits, restarting atomic.Int32
	s, err := procgroup.Supervise(procgroup.SupervisorOptions{
		Name: "test child",
		Command: func() *exec.Cmd {
			// Runs until the file exists, then exits 3.
			return exec.Command("/bin/sh", "-c", `while [ ! -e "$0" ]; do sleep 0.05; done; exit 3`, die)
		},
		Restarts: 2,
		OnStart:  func(int) { starts.Add(1) },
		OnExit: func(_ error, again bool) {
			exits.Add(1)
			if again {
				restarting.Add(1)
			}
		},
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.PID()).To(BeNumerically(">", 0))
	s.Ready()
	g.Expect(os.WriteFile(die, nil, 0o600)).To(Succeed())

	g.Eventually(s.Exited()).WithTimeout(30 * time.Second).Should(BeClosed())
	g.Expect(starts.Load()).To(BeEquivalentTo(3), "the first start and two restarts")
	g.Expect(exits.Load()).To(BeEquivalentTo(3))
	g.Expect(restarting.Load()).To(BeEquivalentTo(2))
	g.Expect(s.Err()).To(MatchError(ContainSubstring("exit status 3")))
}

// Kill ends the process at once, without a restart and without reporting
// an unexpected exit; Terminate afterwards returns at once.
func TestSupervisorKillDoesNotRestart(t *testing.T) {
	g := NewWithT(t)
	var starts, exits atomic.Int32
	s, err := procgroup.Supervise(procgroup.SupervisorOptions{
		Name:     "test child",
		Command:  func() *exec.Cmd { return exec.Command("/bin/sh", "-c", "sleep 60") },
		Restarts: 3,
		OnStart:  func(int) { starts.Add(1) },
		OnExit:   func(error, bool) { exits.Add(1) },
	})
	g.Expect(err).NotTo(HaveOccurred())
	s.Ready()
	g.Expect(s.Err()).NotTo(HaveOccurred(), "no error while it runs")
	s.Kill()
	g.Eventually(s.Exited()).WithTimeout(10 * time.Second).Should(BeClosed())
	g.Expect(s.Terminate(time.Minute)).To(Succeed())
	g.Expect(starts.Load()).To(BeEquivalentTo(1))
	g.Expect(exits.Load()).To(BeZero())
}

// A command that cannot start is Supervise's error.
func TestSupervisorReportsAFailedStart(t *testing.T) {
	g := NewWithT(t)
	_, err := procgroup.Supervise(procgroup.SupervisorOptions{
		Name:    "test child",
		Command: func() *exec.Cmd { return exec.Command(filepath.Join(t.TempDir(), "missing")) },
	})
	g.Expect(err).To(MatchError(ContainSubstring("failed to start test child")))
}
