package controlplane

import "syscall"

// procAttr puts a child in its own process group, so that stopping it
// signals everything it started, and asks the kernel to SIGKILL it when the
// thread that started it dies: whatever kills dev (kill -9 included) kills
// etcd and kube-apiserver too.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
