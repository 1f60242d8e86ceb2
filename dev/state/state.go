// Package state marks a dev environment's state folder as owned by the
// running dev process and records the processes it starts, so that the next
// start can tell a folder left by a killed dev (its owner is gone) from one
// in use, stop what that dev left running, and remove the folder.
//
// A process is named by its id and its start time (from /proc), so that a
// recycled process id never makes a stranger look like the owner or a
// leftover child.
//
// What it acts on must be this user's own: a state folder not owned by the
// user is refused (Claim) or left alone (CleanStale, which also leaves
// folders whose mode is not 0700), and a record another user could have
// written is never believed, so that a folder or record planted in a shared
// $TMPDIR cannot make dev SIGKILL anything.
package state

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// File names inside a state folder.
const (
	// OwnerFile holds "<pid> <start time>" of the dev process using the folder.
	OwnerFile = "dev.owner"
	// ProcessesFile holds one "<name> <pid> <start time>" line per process
	// the owner started.
	ProcessesFile = "dev.processes"
)

// Lock is a state folder owned by this process.
type Lock struct {
	dir string
}

// Claim makes this process the owner of dir. It fails when dir is not
// owned by this user, or when a live dev owns it. Otherwise it makes dir
// private (see Secure) and, when the owner is gone (killed), kills the
// processes that dev recorded and that still run; the folder's content is
// left to the caller.
func Claim(dir string) (*Lock, error) { return claim(dir, os.Getuid()) }

func claim(dir string, uid int) (*Lock, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("failed to create the state folder: %w", err)
	}
	if err := secure(dir, uid); err != nil {
		return nil, err
	}
	if owner, ok := readOwner(dir); ok && owner.alive() && owner.pid != os.Getpid() {
		return nil, fmt.Errorf("state folder %s is in use by capi-monolith dev (pid %d)", dir, owner.pid)
	}
	if err := killRecorded(dir, uid); err != nil {
		return nil, err
	}
	self, err := identify(os.Getpid())
	if err != nil {
		return nil, err
	}
	if err := os.Remove(filepath.Join(dir, ProcessesFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("failed to reset the process record: %w", err)
	}
	if err := writeAtomic(filepath.Join(dir, OwnerFile), self.String()+"\n"); err != nil {
		return nil, err
	}
	return &Lock{dir: dir}, nil
}

// Secure makes an existing state folder (a reused --data-dir) private: the
// folder and every folder in it 0700, every file readable and writable by
// the owner only (it holds etcd's data, keys and the admin kubeconfig). It
// refuses, changing nothing, a folder or entry not owned by this user.
// Records that another user could have written (dev.owner, dev.processes)
// are removed rather than believed. Symbolic links are neither followed
// nor changed.
func Secure(dir string) error { return secure(dir, os.Getuid()) }

func secure(dir string, uid int) error {
	// A --data-dir given as a link: the folder it names is the one to check.
	dir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return fmt.Errorf("failed to resolve the state folder: %w", err)
	}
	info, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("failed to read the state folder %s: %w", dir, err)
	}
	if !info.IsDir() {
		return fmt.Errorf("state folder %s is not a folder", dir)
	}
	// Check everything before changing anything: a refused folder is left
	// as it was.
	var fixes []func() error
	// Files that go away meanwhile (etcd's, when a live dev owns the
	// folder and Claim is about to say so) are no concern.
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("failed to read %s: %w", path, err)
		}
		info, err := os.Lstat(path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("failed to read %s: %w", path, err)
		}
		if owner, ok := ownerOf(info); !ok || owner != uid {
			what := path + " in it is"
			if path == dir {
				what = "it is"
			}
			return fmt.Errorf("refusing to use the state folder %s: %s owned by uid %d, not by this user (uid %d); use a folder of your own", dir, what, owner, uid)
		}
		mode := info.Mode()
		switch {
		case mode&fs.ModeSymlink != 0:
			// chmod would follow it out of the folder.
			return nil
		case mode.IsDir():
			if mode.Perm() != 0o700 {
				fixes = append(fixes, func() error { return os.Chmod(path, 0o700) })
			}
		case isRecord(dir, path) && mode.Perm()&0o022 != 0:
			fixes = append(fixes, func() error { return os.Remove(path) })
		case mode.Perm()&0o077 != 0:
			perm := mode.Perm() &^ 0o077
			fixes = append(fixes, func() error { return os.Chmod(path, perm) })
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, fix := range fixes {
		if err := fix(); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("failed to make the state folder %s private: %w", dir, err)
		}
	}
	return nil
}

// isRecord tells whether path is one of dir's own records.
func isRecord(dir, path string) bool {
	return path == filepath.Join(dir, OwnerFile) || path == filepath.Join(dir, ProcessesFile)
}

// ownerOf is the uid owning the file info describes.
func ownerOf(info fs.FileInfo) (int, bool) {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return -1, false
	}
	return int(st.Uid), true
}

// trusted tells whether path is a file only uid could have written: a
// regular file (not a link) of uid's, not writable by group or others.
// A missing file is trusted: there is nothing to believe.
func trusted(path string, uid int) bool {
	info, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return true
	}
	return err == nil && writableOnlyBy(info, uid)
}

// writableOnlyBy tells whether info is a regular file of uid's that neither
// group nor others may write.
func writableOnlyBy(info fs.FileInfo, uid int) bool {
	if !info.Mode().IsRegular() || info.Mode().Perm()&0o022 != 0 {
		return false
	}
	owner, ok := ownerOf(info)
	return ok && owner == uid
}

// private tells whether dir is a folder only uid can write to and read: a
// folder (not a link) of uid's with mode 0700, whose records are trusted.
func private(dir string, uid int) bool {
	info, err := os.Lstat(dir)
	if err != nil || !info.IsDir() || info.Mode().Perm() != 0o700 {
		return false
	}
	if owner, ok := ownerOf(info); !ok || owner != uid {
		return false
	}
	return trusted(filepath.Join(dir, OwnerFile), uid) && trusted(filepath.Join(dir, ProcessesFile), uid)
}

// Record notes a process this dev started, for a later Claim or Clean to
// stop should this dev be killed before it stops it.
func (l *Lock) Record(name string, pid int) error {
	p, err := identify(pid)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(l.dir, ProcessesFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("failed to open the process record: %w", err)
	}
	defer f.Close()
	if _, err := fmt.Fprintf(f, "%s %s\n", strings.ReplaceAll(name, " ", "_"), p); err != nil {
		return fmt.Errorf("failed to record process %s: %w", name, err)
	}
	return nil
}

// Release gives the folder up after a clean stop, for a kept (--data-dir)
// folder; a temporary one is removed instead.
func (l *Lock) Release() error {
	var errs []error
	for _, name := range []string{ProcessesFile, OwnerFile} {
		if err := os.Remove(filepath.Join(l.dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("failed to remove %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// CleanStale removes the folders root/<prefix>* that a killed dev of this
// user left: an owner file whose process is gone. The processes that dev
// recorded and that still run are killed first. Folders without an owner
// file (not a dev state folder, or one being set up), folders of a live dev
// and folders that are not private (owned by another user, mode not 0700,
// records others could write: planted, or not made by dev) are left alone.
// It returns the folders it removed.
func CleanStale(root, prefix string) ([]string, error) {
	return cleanStale(root, prefix, os.Getuid())
}

func cleanStale(root, prefix string, uid int) ([]string, error) {
	matches, err := filepath.Glob(filepath.Join(root, prefix+"*"))
	if err != nil {
		return nil, fmt.Errorf("failed to list %s: %w", root, err)
	}
	var removed []string
	var errs []error
	for _, dir := range matches {
		if !private(dir, uid) {
			continue
		}
		owner, ok := readOwner(dir)
		if !ok || owner.alive() {
			continue
		}
		if err := killRecorded(dir, uid); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, fmt.Errorf("failed to remove the stale state folder %s: %w", dir, err))
			continue
		}
		removed = append(removed, dir)
	}
	return removed, errors.Join(errs...)
}

// proc is a process named by id and start time.
type proc struct {
	pid   int
	start string
}

func (p proc) String() string { return strconv.Itoa(p.pid) + " " + p.start }

// alive is true when a process with p's id runs and started when p did.
func (p proc) alive() bool {
	now, err := identify(p.pid)
	return err == nil && now.start == p.start
}

// identify reads pid's start time: field 22 of /proc/<pid>/stat (clock ticks
// since boot). Where there is no /proc, the start time is "-" and only the id
// is compared.
func identify(pid int) (proc, error) {
	if pid <= 0 {
		return proc{}, fmt.Errorf("invalid process id %d", pid)
	}
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if errors.Is(err, os.ErrNotExist) {
		if _, statErr := os.Stat("/proc/self"); statErr == nil {
			return proc{}, fmt.Errorf("process %d does not exist", pid)
		}
		if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
			return proc{}, fmt.Errorf("process %d does not exist: %w", pid, err)
		}
		return proc{pid: pid, start: "-"}, nil
	}
	if err != nil {
		return proc{}, fmt.Errorf("failed to read the state of process %d: %w", pid, err)
	}
	// The command name, in parentheses, may hold spaces: count after it.
	s := string(stat)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	// fields[0] is field 3 (state); the start time is field 22.
	if len(fields) < 20 {
		return proc{}, fmt.Errorf("failed to parse the state of process %d", pid)
	}
	if fields[0] == "Z" {
		return proc{}, fmt.Errorf("process %d is a zombie", pid)
	}
	return proc{pid: pid, start: fields[19]}, nil
}

func readOwner(dir string) (proc, bool) {
	data, err := os.ReadFile(filepath.Join(dir, OwnerFile))
	if err != nil {
		return proc{}, false
	}
	fields := strings.Fields(string(data))
	if len(fields) != 2 {
		return proc{}, false
	}
	pid, err := strconv.Atoi(fields[0])
	if err != nil {
		return proc{}, false
	}
	return proc{pid: pid, start: fields[1]}, true
}

// killRecorded sends SIGKILL to the process group of every recorded process
// that still runs and started when the record says (each child leads a group
// of its own): a process id used again since names another process. A record
// uid could not have written alone is not believed.
func killRecorded(dir string, uid int) error {
	// O_NOFOLLOW, and the checks on what was opened: a link cannot point
	// the record elsewhere.
	f, err := os.OpenFile(filepath.Join(dir, ProcessesFile), os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ELOOP) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("failed to read the process record: %w", err)
	}
	defer f.Close()
	if info, err := f.Stat(); err != nil || !writableOnlyBy(info, uid) {
		return nil
	}
	var errs []error
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		fields := strings.Fields(scanner.Text())
		if len(fields) != 3 {
			continue
		}
		pid, err := strconv.Atoi(fields[1])
		if err != nil || pid <= 1 {
			continue
		}
		if !(proc{pid: pid, start: fields[2]}).alive() {
			continue
		}
		if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			// Not a group leader after all: the process itself.
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
				errs = append(errs, fmt.Errorf("failed to kill leftover %s (pid %d): %w", fields[0], pid, err))
			}
		}
	}
	return errors.Join(append(errs, scanner.Err())...)
}

func writeAtomic(path, content string) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		return fmt.Errorf("failed to write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("failed to write %s: %w", path, err)
	}
	return nil
}

// Self names this process for marks left outside the state folder (in a
// cluster): "<host> <pid> <start time>".
func Self() (string, error) {
	p, err := identify(os.Getpid())
	if err != nil {
		return "", err
	}
	host, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("failed to read the host name: %w", err)
	}
	return strings.ReplaceAll(host, " ", "_") + " " + p.String(), nil
}

// Running tells whether the process Self named runs. A process of another
// host counts as gone: a dev serves its webhooks on loopback, which only
// works when it runs on the apiserver's host, and there is no way to ask.
func Running(self string) bool {
	fields := strings.Fields(self)
	if len(fields) != 3 {
		return false
	}
	host, err := os.Hostname()
	if err != nil || strings.ReplaceAll(host, " ", "_") != fields[0] {
		return false
	}
	pid, err := strconv.Atoi(fields[1])
	if err != nil {
		return false
	}
	return proc{pid: pid, start: fields[2]}.alive()
}
