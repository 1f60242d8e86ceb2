// Command kube-apiserver is the Kubernetes API server of the pinned release,
// built from source so that envtest runs without downloading binaries.
package main

import (
	"os"

	_ "time/tzdata" // the apiserver parses time zones in CronJob specs.

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
