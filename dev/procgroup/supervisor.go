package procgroup

import (
	"fmt"
	"os/exec"
	"runtime"
	"sync"
	"time"
)

// restartDelay is how long a Supervisor waits before starting a process
// that died again.
const restartDelay = time.Second

// SupervisorOptions configure a Supervisor.
type SupervisorOptions struct {
	// Name says which child in errors.
	Name string
	// Command makes the command of each start; the Supervisor makes it its
	// process group's leader with a parent-death signal (Attr).
	Command func() *exec.Cmd
	// Restarts is how often a process that dies after Ready is started
	// again before the Supervisor gives up.
	Restarts int
	// OnStart, when set, is called with the pid of every start.
	OnStart func(pid int)
	// OnExit, when set, is called when a process dies after Ready and
	// before Terminate or Kill; restarting says whether it is started again.
	OnExit func(err error, restarting bool)
}

// Supervisor runs one child process as a process group of its own and
// starts it again, within Restarts, when it dies after being declared
// ready. Stopping is Terminate (SIGTERM, SIGKILL after a grace period) or
// Kill (SIGKILL at once, for a second Ctrl-C).
type Supervisor struct {
	opts SupervisorOptions

	mu       sync.Mutex
	cmd      *exec.Cmd
	ready    bool
	stopping bool

	err    error
	exited chan struct{}
	force  chan struct{}
}

// Supervise starts the process and returns once it started (or failed to).
func Supervise(opts SupervisorOptions) (*Supervisor, error) {
	s := &Supervisor{opts: opts, exited: make(chan struct{}), force: make(chan struct{})}
	// The goroutine reports the first start on its own copy of the channel
	// (it forgets it afterwards), so the receive below never reads a nil
	// channel however the two goroutines are scheduled.
	startedCh := make(chan error, 1)
	started := startedCh
	go func() {
		defer close(s.exited)
		// Pdeathsig fires when the thread that started the child exits, not
		// the process: keep this goroutine on its thread while children run.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		for restarts := 0; ; restarts++ {
			cmd := s.opts.Command()
			cmd.SysProcAttr = Attr()
			// Should the child leave a process holding its output, Wait
			// still returns.
			cmd.WaitDelay = time.Second
			s.mu.Lock()
			if s.stopping {
				s.mu.Unlock()
				return
			}
			err := cmd.Start()
			if err == nil {
				s.cmd = cmd
			}
			s.mu.Unlock()
			if err != nil {
				s.err = fmt.Errorf("failed to start %s %s: %w", s.opts.Name, cmd.Path, err)
				if started != nil {
					started <- s.err
				}
				return
			}
			if s.opts.OnStart != nil {
				s.opts.OnStart(cmd.Process.Pid)
			}
			if started != nil {
				started <- nil
				started = nil
			}
			err = cmd.Wait()
			s.mu.Lock()
			unexpected := s.ready && !s.stopping
			again := unexpected && restarts < s.opts.Restarts
			s.mu.Unlock()
			if unexpected && s.opts.OnExit != nil {
				s.opts.OnExit(err, again)
			}
			if !again {
				s.err = err
				return
			}
			time.Sleep(restartDelay)
		}
	}()
	if err := <-startedCh; err != nil {
		return nil, err
	}
	return s, nil
}

// Ready declares the process ready: from now on its death is unexpected,
// reported to OnExit and answered with a restart.
func (s *Supervisor) Ready() {
	s.mu.Lock()
	s.ready = true
	s.mu.Unlock()
}

// Terminate ends the process for good: SIGTERM to its group, SIGKILL after
// grace (at once after Kill); it returns once the process is gone.
func (s *Supervisor) Terminate(grace time.Duration) error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	s.stopping = true
	cmd := s.cmd
	s.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return nil
	}
	return Stop(cmd.Process.Pid, s.opts.Name, grace, s.exited, s.force)
}

// Kill sends SIGKILL to the process group at once and keeps the process
// from being started again; a Terminate running or to come then does not
// wait for a graceful exit.
func (s *Supervisor) Kill() {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.stopping = true
	cmd := s.cmd
	select {
	case <-s.force:
	default:
		close(s.force)
	}
	s.mu.Unlock()
	if cmd != nil && cmd.Process != nil {
		Kill(cmd.Process.Pid)
	}
}

// Exited is closed when the process has exited for good: terminated,
// killed, or dead after its restarts.
func (s *Supervisor) Exited() <-chan struct{} { return s.exited }

// Err is the process's last exit error (nil for a clean exit) once Exited
// is closed, and nil before.
func (s *Supervisor) Err() error {
	select {
	case <-s.exited:
		return s.err
	default:
		return nil
	}
}

// PID is the id of the current process, which is also its process group id.
func (s *Supervisor) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd.Process.Pid
}
