package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/capi-monolith/capi-monolith/test/bench/harness"
	"github.com/capi-monolith/capi-monolith/test/bench/harness/memstat"
)

const (
	// devReadyTimeout bounds dev's start: etcd, kube-apiserver, CRDs, the
	// three Cluster API managers and the modules.
	devReadyTimeout = 5 * time.Minute
	// devStopTimeout is how long dev gets after SIGINT before it is killed.
	devStopTimeout = 2 * time.Minute
)

// Part names a process of the dev tree in the figures.
type Part string

// The processes of `capi-monolith dev` the benchmark reports on.
const (
	PartMonolith     Part = "capi-monolith"
	PartCore         Part = "capi core manager"
	PartBootstrap    Part = "kubeadm bootstrap manager"
	PartControlPlane Part = "kubeadm control plane manager"
	PartAPIServer    Part = "kube-apiserver"
	PartEtcd         Part = "etcd"
)

// Parts lists them in report order.
var Parts = []Part{PartMonolith, PartCore, PartBootstrap, PartControlPlane, PartAPIServer, PartEtcd}

// Dev is a running `capi-monolith dev`, started as a user starts it, and the
// ids of the processes it runs.
type Dev struct {
	cmd        *exec.Cmd
	exited     chan struct{}
	waitErr    error
	stderr     *tail
	Kubeconfig string
	// PIDs are the processes by part, found once dev is ready.
	PIDs map[Part]int
}

// StartDev runs `<binary> dev --kubeconfig-out=<dir>/dev.kubeconfig --quiet`
// with an ephemeral state folder and waits for the kubeconfig line on stdout,
// which dev prints once everything is ready.
func StartDev(ctx context.Context, binary, dir string, extraArgs []string) (_ *Dev, retErr error) {
	d := &Dev{exited: make(chan struct{}), stderr: &tail{}, Kubeconfig: filepath.Join(dir, "dev.kubeconfig")}
	args := append([]string{"dev", "--kubeconfig-out=" + d.Kubeconfig, "--quiet"}, extraArgs...)
	d.cmd = exec.Command(binary, args...)
	d.cmd.Dir = dir
	d.cmd.Stderr = d.stderr
	stdout, err := d.cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("failed to read dev's output: %w", err)
	}
	if err := d.cmd.Start(); err != nil {
		return nil, fmt.Errorf("failed to start %s dev: %w", binary, err)
	}
	go func() {
		d.waitErr = d.cmd.Wait()
		close(d.exited)
	}()
	defer func() {
		if retErr != nil {
			retErr = errors.Join(retErr, d.Stop())
		}
	}()
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if path, ok := strings.CutPrefix(sc.Text(), "kubeconfig: "); ok {
				ready <- path
			}
		}
	}()
	select {
	case path := <-ready:
		d.Kubeconfig = path
	case <-d.exited:
		return nil, fmt.Errorf("capi-monolith dev exited before it was ready (%v):\n%s", d.waitErr, d.stderr)
	case <-time.After(devReadyTimeout):
		return nil, fmt.Errorf("capi-monolith dev not ready within %s:\n%s", devReadyTimeout, d.stderr)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if d.PIDs, err = findParts(d.cmd.Process.Pid); err != nil {
		return nil, err
	}
	return d, nil
}

// Stop sends SIGINT (Ctrl-C), as a user stops dev, and kills it if it has
// not exited within devStopTimeout.
func (d *Dev) Stop() error {
	select {
	case <-d.exited:
		return d.exitError()
	default:
	}
	_ = d.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-d.exited:
		return d.exitError()
	case <-time.After(devStopTimeout):
		_ = d.cmd.Process.Signal(syscall.SIGINT) // a second Ctrl-C kills every child
		select {
		case <-d.exited:
		case <-time.After(devStopTimeout):
			_ = d.cmd.Process.Kill()
			<-d.exited
		}
		return fmt.Errorf("capi-monolith dev did not stop within %s of SIGINT", devStopTimeout)
	}
}

// Exited is closed when dev has ended.
func (d *Dev) Exited() <-chan struct{} { return d.exited }

func (d *Dev) exitError() error {
	if d.waitErr == nil {
		return nil
	}
	return fmt.Errorf("capi-monolith dev exited with %v:\n%s", d.waitErr, d.stderr)
}

// Usage is one reading of every part: resident memory now and at its peak,
// and CPU time used so far.
type Usage map[Part]PartUsage

// PartUsage is one process's reading.
type PartUsage struct {
	Memory memstat.Status
	CPU    time.Duration
}

// Read reads every part from /proc.
func (d *Dev) Read() (Usage, error) {
	out := Usage{}
	for part, pid := range d.PIDs {
		mem, err := memstat.ReadProcess(pid)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", part, err)
		}
		cpu, err := harness.ProcessCPU(pid)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", part, err)
		}
		out[part] = PartUsage{Memory: mem, CPU: cpu}
	}
	return out, nil
}

// SteadyRSS waits settle, then reads VmRSS of every part once a second for
// window and returns each part's mean: memory once the work that came before
// has been collected, rather than one reading that a GC cycle can move.
func (d *Dev) SteadyRSS(ctx context.Context, settle, window time.Duration) (map[Part]uint64, error) {
	select {
	case <-time.After(settle):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	sums := map[Part]uint64{}
	n := uint64(0)
	for start := time.Now(); n == 0 || time.Since(start) < window; n++ {
		u, err := d.Read()
		if err != nil {
			return nil, err
		}
		for part, r := range u {
			sums[part] += r.Memory.Current
		}
		select {
		case <-time.After(time.Second):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	for part := range sums {
		sums[part] /= n
	}
	return sums, nil
}

// findParts finds dev's children below pid: etcd and kube-apiserver by
// their command names, the three Cluster API managers (all named
// "manager") by the tool cache folder their binary lives in.
func findParts(pid int) (map[Part]int, error) {
	out := map[Part]int{PartMonolith: pid}
	for _, child := range descendants(pid) {
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", child))
		switch strings.TrimSpace(string(comm)) {
		case "etcd":
			out[PartEtcd] = child
		case "kube-apiserver":
			out[PartAPIServer] = child
		case "manager":
			exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", child))
			switch {
			case strings.Contains(exe, "capi-core"):
				out[PartCore] = child
			case strings.Contains(exe, "capi-kubeadm-bootstrap"):
				out[PartBootstrap] = child
			case strings.Contains(exe, "capi-kubeadm-control-plane"):
				out[PartControlPlane] = child
			}
		}
	}
	for _, part := range Parts {
		if _, ok := out[part]; !ok {
			return nil, fmt.Errorf("failed to find the %s process below capi-monolith dev (pid %d)", part, pid)
		}
	}
	return out, nil
}

// descendants returns every process below pid, from /proc.
func descendants(pid int) []int {
	parent := map[int]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		if err != nil {
			continue
		}
		// "pid (comm) state ppid ...": comm may hold spaces.
		rest := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
		if len(rest) < 2 {
			continue
		}
		if pp, err := strconv.Atoi(rest[1]); err == nil {
			parent[p] = pp
		}
	}
	var out []int
	for p := range parent {
		for q := parent[p]; q > 1; q = parent[q] {
			if q == pid {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// tail keeps the last 8 KiB written to it: dev's stderr, for errors.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

var _ io.Writer = (*tail)(nil)

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - 8<<10; over > 0 {
		t.buf = t.buf[over:]
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
