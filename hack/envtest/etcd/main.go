// Command etcd is the etcd server of the pinned release, built from source so
// that envtest runs without downloading binaries.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
