package capicore

import "syscall"

// procAttr puts the manager in its own process group, so that Stop signals
// everything it started, and asks the kernel to kill it when the parent process
// dies without calling Stop.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
