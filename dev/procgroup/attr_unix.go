//go:build unix && !linux

package procgroup

import "syscall"

// Attr puts a child in its own process group, so that Stop signals
// everything it started. There is no parent-death signal outside Linux: the
// next dev start removes what a killed one left (package state).
func Attr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
