//go:build unix && !linux

package capicore

import "syscall"

// procAttr puts the manager in its own process group, so that Stop signals
// everything it started.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
