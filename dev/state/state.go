// Package state marks a dev environment's state folder as owned by the
// running dev process and records the processes it starts, so that the next
// start can tell a folder left by a killed dev (its owner is gone) from one
// in use, stop what that dev left running, and remove the folder.
//
// A process is named by its id and its start time (from /proc), so that a
// recycled process id never makes a stranger look like the owner or a
// leftover child.
package state

import (
	"bufio"
	"errors"
	"fmt"
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

// Claim makes this process the owner of dir. It fails when a live dev owns
// it. When the owner is gone (killed), it first kills the processes that dev
// recorded and that still run; the folder's content is left to the caller.
func Claim(dir string) (*Lock, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("failed to create the state folder: %w", err)
	}
	if owner, ok := readOwner(dir); ok && owner.alive() && owner.pid != os.Getpid() {
		return nil, fmt.Errorf("state folder %s is in use by capi-monolith dev (pid %d)", dir, owner.pid)
	}
	if err := killRecorded(dir); err != nil {
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

// CleanStale removes the folders root/<prefix>* that a killed dev left: an
// owner file whose process is gone. The processes that dev recorded and that
// still run are killed first. Folders without an owner file (not a dev
// state folder, or one being set up) and folders of a live dev are left
// alone. It returns the folders it removed.
func CleanStale(root, prefix string) ([]string, error) {
	matches, err := filepath.Glob(filepath.Join(root, prefix+"*"))
	if err != nil {
		return nil, fmt.Errorf("failed to list %s: %w", root, err)
	}
	var removed []string
	var errs []error
	for _, dir := range matches {
		owner, ok := readOwner(dir)
		if !ok || owner.alive() {
			continue
		}
		if err := killRecorded(dir); err != nil {
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
// that still runs (each child leads a group of its own).
func killRecorded(dir string) error {
	f, err := os.Open(filepath.Join(dir, ProcessesFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("failed to read the process record: %w", err)
	}
	defer f.Close()
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
