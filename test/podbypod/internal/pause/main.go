// Command pause holds a pod's network namespace: the harness runs it as
// each pod's sandbox container, and the pod's containers join its network
// (Docker's container:<id> network mode), as a kubelet's pause container.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
}
