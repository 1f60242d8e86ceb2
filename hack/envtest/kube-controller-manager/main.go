// Command kube-controller-manager is the Kubernetes controller manager of the
// pinned release, built from source like kube-apiserver. capi-monolith dev
// runs it for the garbage collector and the namespace controller only.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

func main() {
	os.Exit(cli.Run(app.NewControllerManagerCommand()))
}
