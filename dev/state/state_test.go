package state

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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

// watched is a child process (a sleep in a group of its own, as dev's
// children are) whose end tells which signal ended it.
type watched struct {
	pid    int
	exited chan *os.ProcessState
}

func startWatched(t *testing.T) *watched {
	t.Helper()
	cmd := exec.Command("sleep", "300")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w := &watched{pid: cmd.Process.Pid, exited: make(chan *os.ProcessState, 1)}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		w.exited <- cmd.ProcessState
		close(done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	return w
}

// endedBy sends SIGTERM and returns the signal that ended the process: a
// SIGKILL sent earlier (by the code under test) wins over it, so SIGTERM
// means nothing else signalled it, with no wait for a signal that might
// still come.
func (w *watched) endedBy(g Gomega) syscall.Signal {
	_ = syscall.Kill(w.pid, syscall.SIGTERM)
	var st *os.ProcessState
	g.Eventually(w.exited).WithTimeout(10 * time.Second).Should(Receive(&st))
	ws, ok := st.Sys().(syscall.WaitStatus)
	g.Expect(ok).To(BeTrue())
	g.Expect(ws.Signaled()).To(BeTrue(), "ended by a signal: %v", st)
	return ws.Signal()
}

// staleFolder makes root/capi-monolith-dev-<name>, as a killed dev leaves
// it: mode 0700, an owner that is gone, and w recorded with its start time.
func staleFolder(t *testing.T, root, name string, w *watched) string {
	t.Helper()
	g := NewWithT(t)
	dir := filepath.Join(root, "capi-monolith-dev-"+name)
	writeDeadOwner(t, dir)
	g.Expect((&Lock{dir: dir}).Record("etcd", w.pid)).To(Succeed())
	return dir
}

func TestTheSweepLeavesFoldersItCannotTrustAloneAndSignalsOnlyTheRecordedProcesses(t *testing.T) {
	me := os.Getuid()
	for _, tc := range []struct {
		name string
		// plant turns a killed dev's folder in root into the case's; it
		// returns the path the sweep finds.
		plant   func(t *testing.T, g Gomega, dir string) string
		uid     int
		removed bool
	}{{
		name:  "a folder owned by another user is left alone and its processes are not signalled",
		plant: func(t *testing.T, g Gomega, dir string) string { return dir },
		// The sweep runs as another user than the folder's owner: what a
		// folder planted by someone else is to the user sweeping.
		uid: me + 1,
	}, {
		name: "a folder with mode 0755 is left alone and its processes are not signalled",
		plant: func(t *testing.T, g Gomega, dir string) string {
			g.Expect(os.Chmod(dir, 0o755)).To(Succeed())
			return dir
		},
		uid: me,
	}, {
		name: "a folder whose process record others may write is left alone and its processes are not signalled",
		plant: func(t *testing.T, g Gomega, dir string) string {
			g.Expect(os.Chmod(filepath.Join(dir, ProcessesFile), 0o666)).To(Succeed())
			return dir
		},
		uid: me,
	}, {
		name: "a link to a killed dev's folder is left alone and its processes are not signalled",
		plant: func(t *testing.T, g Gomega, dir string) string {
			moved := filepath.Join(t.TempDir(), "elsewhere")
			g.Expect(os.Rename(dir, moved)).To(Succeed())
			g.Expect(os.Symlink(moved, dir)).To(Succeed())
			return dir
		},
		uid: me,
	}, {
		name: "a recorded process whose start time differs is not signalled, and the folder is removed",
		plant: func(t *testing.T, g Gomega, dir string) string {
			record := filepath.Join(dir, ProcessesFile)
			data, err := os.ReadFile(record)
			g.Expect(err).NotTo(HaveOccurred())
			fields := strings.Fields(string(data))
			g.Expect(fields).To(HaveLen(3))
			// The process id used again by another process: same id,
			// another start time.
			wrong := fmt.Sprintf("%s %s 1%s\n", fields[0], fields[1], fields[2])
			g.Expect(os.WriteFile(record, []byte(wrong), 0o600)).To(Succeed())
			return dir
		},
		uid:     me,
		removed: true,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			root := t.TempDir()
			w := startWatched(t)
			dir := tc.plant(t, g, staleFolder(t, root, "planted", w))

			removed, err := cleanStale(root, "capi-monolith-dev-", tc.uid)
			g.Expect(err).NotTo(HaveOccurred())
			if tc.removed {
				g.Expect(removed).To(ConsistOf(dir))
				g.Expect(dir).NotTo(BeAnExistingFile())
			} else {
				g.Expect(removed).To(BeEmpty())
				_, err := os.Lstat(dir)
				g.Expect(err).NotTo(HaveOccurred(), "the folder is left alone")
			}
			g.Expect(w.endedBy(g)).To(Equal(syscall.SIGTERM), "the sweep sent the process no signal")
		})
	}
}

func TestClaimRefusesAFolderOfAnotherUserAndChangesAndSignalsNothing(t *testing.T) {
	g := NewWithT(t)
	w := startWatched(t)
	dir := staleFolder(t, t.TempDir(), "data", w)
	g.Expect(os.Chmod(dir, 0o755)).To(Succeed())

	_, err := claim(dir, os.Getuid()+1)
	g.Expect(err).To(MatchError(And(ContainSubstring("refusing to use the state folder "+dir), ContainSubstring("not by this user"))))
	info, err := os.Stat(dir)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(info.Mode().Perm()).To(Equal(os.FileMode(0o755)), "a refused folder is left as it was")
	g.Expect(w.endedBy(g)).To(Equal(syscall.SIGTERM), "no process recorded there is signalled")
}

func TestClaimMakesAReusedFolderPrivateAndDisbelievesRecordsOthersMayWrite(t *testing.T) {
	g := NewWithT(t)
	w := startWatched(t)
	dir := staleFolder(t, t.TempDir(), "data", w)
	outside := filepath.Join(t.TempDir(), "not-ours.txt")
	g.Expect(os.WriteFile(outside, nil, 0o644)).To(Succeed())
	files := map[string]os.FileMode{
		"kubeconfig":        0o644,
		"pki/apiserver.key": 0o640,
		"etcd/member/wal/0": 0o666,
		"logs/a.log":        0o755,
	}
	for name, mode := range files {
		path := filepath.Join(dir, name)
		g.Expect(os.MkdirAll(filepath.Dir(path), 0o755)).To(Succeed())
		g.Expect(os.WriteFile(path, nil, mode)).To(Succeed())
		g.Expect(os.Chmod(path, mode)).To(Succeed())
	}
	g.Expect(os.Symlink(outside, filepath.Join(dir, "link"))).To(Succeed())
	g.Expect(os.Chmod(dir, 0o755)).To(Succeed())
	// Anyone could have listed any process of the user's in it.
	g.Expect(os.Chmod(filepath.Join(dir, ProcessesFile), 0o666)).To(Succeed())

	lock, err := claim(dir, os.Getuid())
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = lock.Release() })
	g.Expect(w.endedBy(g)).To(Equal(syscall.SIGTERM), "a record others could write is not believed")

	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		g.Expect(err).NotTo(HaveOccurred())
		info, err := os.Lstat(path)
		g.Expect(err).NotTo(HaveOccurred())
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
		case info.IsDir():
			g.Expect(info.Mode().Perm()).To(Equal(os.FileMode(0o700)), path)
		default:
			g.Expect(info.Mode().Perm()&0o077).To(BeZero(), "%s: %s", path, info.Mode())
		}
		return nil
	})
	g.Expect(err).NotTo(HaveOccurred())
	info, err := os.Stat(filepath.Join(dir, "logs/a.log"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(info.Mode().Perm()).To(Equal(os.FileMode(0o700)), "the owner's bits are kept")
	info, err = os.Stat(outside)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(info.Mode().Perm()).To(Equal(os.FileMode(0o644)), "a link is not followed out of the folder")
}
