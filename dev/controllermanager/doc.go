// Package controllermanager runs kube-controller-manager of the pinned
// release (built with kube-apiserver into the envtest assets, see
// hack/build-envtest-assets.sh) as a supervised child process of dev, with
// only the controllers a Cluster API management cluster without nodes
// needs: the garbage collector, which deletes what a deleted object owned
// (a KubeadmControlPlane's certificate and kubeconfig Secrets, a
// KubeadmConfig's bootstrap data), and the namespace controller, which
// empties and removes a deleted namespace.
//
//	p, err := controllermanager.Start(ctx, controllermanager.Options{BinaryPath: path, Config: cfg, WorkDir: dir, Certs: bundle})
//	...
//	defer p.Stop()
//
// The process runs without leader election, serves /healthz (which Start
// waits for) on 127.0.0.1 only, runs in a process group of its own and, on
// Linux, dies with its parent (parent-death signal), as dev's other
// children do. With Options.Restarts, a process that dies after it was
// ready is started again.
package controllermanager
