// Command pause holds a pod's network namespace: the harness runs it as
// each pod's sandbox container, and the pod's containers join its network
// (Docker's container:<id> network mode), as a kubelet's pause container.
//
// With arguments PORT=HOST:PORT it is a Service's proxy instead, as
// kube-proxy would be: it listens on each PORT and forwards every
// connection to HOST:PORT, HOST resolved at each connection (a name
// Docker's DNS answers with the selected pods' IPs).
package main

import (
	"io"
	"log"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

func main() {
	for _, arg := range os.Args[1:] {
		port, target, ok := strings.Cut(arg, "=")
		if !ok {
			log.Fatalf("argument %q is not PORT=HOST:PORT", arg)
		}
		l, err := net.Listen("tcp", ":"+port)
		if err != nil {
			log.Fatal(err)
		}
		go forward(l, target)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
}

func forward(l net.Listener, target string) {
	for {
		in, err := l.Accept()
		if err != nil {
			log.Fatal(err)
		}
		go func() {
			defer in.Close()
			out, err := net.Dial("tcp", target)
			if err != nil {
				log.Printf("dial %s: %v", target, err)
				return
			}
			defer out.Close()
			go func() { _, _ = io.Copy(out, in) }()
			_, _ = io.Copy(in, out)
		}()
	}
}
