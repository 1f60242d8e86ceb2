// Package procgroup starts and stops dev's child processes (etcd,
// kube-apiserver, kube-controller-manager, Cluster API's managers) as
// process groups of their own, so that stopping one stops everything it
// started; supervises the long-running ones (Supervisor: restarts within a
// budget, Terminate, Kill for a second Ctrl-C); and keeps the last lines of
// their output (Tail) for errors.
package procgroup

import (
	"errors"
	"fmt"
	"syscall"
	"time"
)

// Stop sends SIGTERM to the process group pgid (a child started with Attr
// is its group's leader), SIGKILL after grace, or at once when force is
// closed, and waits until exited is closed. name says which child in errors.
func Stop(pgid int, name string, grace time.Duration, exited, force <-chan struct{}) error {
	select {
	case <-exited:
		return nil
	default:
	}
	if err := syscall.Kill(-pgid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("failed to send SIGTERM to %s: %w", name, err)
	}
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-exited:
		return nil
	case <-timer.C:
	case <-force:
	}
	Kill(pgid)
	<-exited
	return nil
}

// Kill sends SIGKILL to the process group pgid. A group gone already is
// fine: there is nothing left to kill.
func Kill(pgid int) {
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}
