//go:build unix && !linux

package controlplane

import "syscall"

// procAttr puts a child in its own process group, so that stopping it
// signals everything it started. There is no parent-death signal outside
// Linux: the next dev start removes what a killed one left (package state).
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
