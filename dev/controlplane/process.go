package controlplane

import (
	"fmt"
	"io"
	"os/exec"
	"runtime"
	"time"

	"github.com/capi-monolith/capi-monolith/dev/procgroup"
)

// stopGracePeriod is how long stop waits after SIGTERM before SIGKILL.
const stopGracePeriod = 10 * time.Second

// process is etcd or kube-apiserver, started with a parent-death signal.
type process struct {
	name string
	cmd  *exec.Cmd
	// exited is closed once the process has exited; err is set before.
	exited chan struct{}
	err    error
}

// startProcess runs path with args. The process is started, and waited for,
// by one goroutine locked to its OS thread: the kernel sends the
// parent-death signal when the thread that forked the child ends, so that
// thread must live exactly as long as the child.
func startProcess(name, path string, args []string, out io.Writer) (*process, error) {
	p := &process{name: name, exited: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		defer close(p.exited)
		runtime.LockOSThread()
		// Never unlocked: the thread ends with the goroutine, which is what
		// a parent-death signal tied to it should see only once the child
		// is gone.
		cmd := exec.Command(path, args...)
		cmd.Stdout, cmd.Stderr = out, out
		cmd.SysProcAttr = procgroup.Attr()
		cmd.WaitDelay = time.Second
		if err := cmd.Start(); err != nil {
			p.err = fmt.Errorf("failed to start %s (%s): %w", name, path, err)
			started <- p.err
			return
		}
		p.cmd = cmd
		started <- nil
		p.err = cmd.Wait()
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return p, nil
}

// pid is the process's id, which is also its process group's.
func (p *process) pid() int { return p.cmd.Process.Pid }

// stop sends SIGTERM to the process group, SIGKILL after the grace period
// (at once when force is closed), and waits for the exit.
func (p *process) stop(force <-chan struct{}) error {
	if p == nil {
		return nil
	}
	return procgroup.Stop(p.pid(), p.name, stopGracePeriod, p.exited, force)
}

// kill sends SIGKILL to the process group.
func (p *process) kill() {
	if p == nil {
		return
	}
	procgroup.Kill(p.pid())
}
