package dev_test

import (
	"regexp"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

var stateLine = regexp.MustCompile(`state in (\S+)\.\n`)

// stateDirOf reads the state folder dev printed.
func stateDirOf(g Gomega, r *running) string {
	var dir string
	g.Eventually(func() []string { return stateLine.FindStringSubmatch(r.stderr.String()) }).
		WithTimeout(5*time.Second).Should(HaveLen(2), "dev prints its state folder")
	dir = stateLine.FindStringSubmatch(r.stderr.String())[1]
	g.Expect(dir).To(BeADirectory())
	return dir
}

// childrenOf names the processes below dev and checks the kinds it starts.
func childrenOf(g Gomega, r *running) []int {
	children := descendants(r.cmd.Process.Pid)
	names := map[string]bool{}
	for _, pid := range children {
		names[processName(pid)] = true
	}
	g.Expect(names).To(And(HaveKey("etcd"), HaveKey("kube-apiserver"), HaveKey(kubeControllerManagerComm), HaveKey("manager")))
	return children
}

func expectGone(g Gomega, pids []int) {
	for _, pid := range pids {
		g.Eventually(func() error { return syscall.Kill(pid, 0) }).WithTimeout(10*time.Second).
			Should(MatchError(syscall.ESRCH), "process %d (%s) survived dev", pid, processName(pid))
	}
}

// kill -9 of dev: etcd, kube-apiserver, kube-controller-manager and
// Cluster API's managers die with it (parent-death signal), and the next start removes the state folder (with its CA key)
// that the killed one left.
func TestKillingDevKillsItsChildrenAndTheNextStartRemovesItsState(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	first := startBinary(t, g, dir)
	state := stateDirOf(g, first)
	children := childrenOf(g, first)

	g.Expect(first.cmd.Process.Signal(syscall.SIGKILL)).To(Succeed())
	g.Eventually(first.exited).WithTimeout(exitTimeout).Should(Receive())
	expectGone(g, children)
	g.Expect(state).To(BeADirectory(), "nothing ran to remove it")

	second := startBinary(t, g, dir)
	g.Expect(state).NotTo(BeAnExistingFile(), "the killed dev's state is removed")
	g.Expect(second.stderr.String()).To(ContainSubstring("removed the state of a killed capi-monolith dev: " + state))
	second.interrupt(t, g)
}

// A second Ctrl-C makes the stop quick and still cleans up: no child
// survives and the temporary state folder is gone.
func TestASecondCtrlCStillCleansUp(t *testing.T) {
	g := NewWithT(t)
	r := startBinary(t, g, t.TempDir())
	state := stateDirOf(g, r)
	children := childrenOf(g, r)

	g.Expect(r.cmd.Process.Signal(syscall.SIGINT)).To(Succeed())
	g.Eventually(r.stderr.String).WithTimeout(10 * time.Second).Should(ContainSubstring("Stopping ..."))
	g.Expect(r.cmd.Process.Signal(syscall.SIGINT)).To(Succeed())
	g.Eventually(r.exited).WithTimeout(exitTimeout).Should(Receive())
	g.Expect(r.stderr.String()).To(ContainSubstring("Stopping now (second signal)"))
	expectGone(g, children)
	g.Expect(state).NotTo(BeAnExistingFile(), "the state folder is removed")
	g.Expect(r.kubeconfig).NotTo(BeAnExistingFile())
}
