package state

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// startSleeper runs a process in a group of its own, as dev's children are.
func startSleeper(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "300")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	return cmd
}

// writeDeadOwner marks dir as owned by a process that is gone.
func writeDeadOwner(t *testing.T, dir string) {
	t.Helper()
	g := NewWithT(t)
	g.Expect(os.MkdirAll(dir, 0o700)).To(Succeed())
	gone := exec.Command("true")
	g.Expect(gone.Run()).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(dir, OwnerFile), []byte(proc{pid: gone.Process.Pid, start: "1"}.String()+"\n"), 0o600)).To(Succeed())
}

func TestCleanStaleRemovesOnlyFoldersOfAKilledDevAndKillsWhatItLeft(t *testing.T) {
	g := NewWithT(t)
	root := t.TempDir()

	stale := filepath.Join(root, "capi-monolith-dev-stale")
	writeDeadOwner(t, stale)
	leftover := startSleeper(t)
	lock := &Lock{dir: stale}
	g.Expect(lock.Record("etcd", leftover.Process.Pid)).To(Succeed())

	live := filepath.Join(root, "capi-monolith-dev-live")
	_, err := Claim(live)
	g.Expect(err).NotTo(HaveOccurred())
	unowned := filepath.Join(root, "capi-monolith-dev-unowned")
	g.Expect(os.MkdirAll(unowned, 0o700)).To(Succeed())

	removed, err := CleanStale(root, "capi-monolith-dev-")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(removed).To(ConsistOf(stale))
	g.Expect(stale).NotTo(BeAnExistingFile())
	g.Expect(live).To(BeADirectory(), "a live dev's folder stays")
	g.Expect(unowned).To(BeADirectory(), "a folder without an owner is not ours to remove")
	g.Eventually(func() bool { return (proc{pid: leftover.Process.Pid}).aliveAny() }).
		WithTimeout(10*time.Second).Should(BeFalse(), "the leftover process is killed")
}

func TestClaimRefusesAFolderOfALiveDevAndTakesOverAKilledOne(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	parent, err := identify(os.Getppid())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.WriteFile(filepath.Join(dir, OwnerFile), []byte(parent.String()+"\n"), 0o600)).To(Succeed())
	_, err = Claim(dir)
	g.Expect(err).To(MatchError(ContainSubstring("in use by capi-monolith dev")))

	writeDeadOwner(t, dir)
	leftover := startSleeper(t)
	g.Expect((&Lock{dir: dir}).Record("kube-apiserver", leftover.Process.Pid)).To(Succeed())
	lock, err := Claim(dir)
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() bool { return (proc{pid: leftover.Process.Pid}).aliveAny() }).
		WithTimeout(10*time.Second).Should(BeFalse(), "what the killed dev left is killed")
	owner, ok := readOwner(dir)
	g.Expect(ok).To(BeTrue())
	g.Expect(owner.pid).To(Equal(os.Getpid()))
	g.Expect(lock.Release()).To(Succeed())
	g.Expect(filepath.Join(dir, OwnerFile)).NotTo(BeAnExistingFile())
}

// aliveAny is true while any process (not a zombie) has p's id.
func (p proc) aliveAny() bool {
	_, err := identify(p.pid)
	return err == nil
}
