package procgroup

import "syscall"

// Attr puts a child in its own process group, so that Stop signals
// everything it started, and asks the kernel to SIGKILL it when the thread
// that started it dies: whatever kills dev (kill -9 included) kills its
// children too. Keep that thread locked (runtime.LockOSThread) while the
// child runs.
func Attr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
