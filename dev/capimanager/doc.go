// Package capimanager runs one of Cluster API's own managers (core, kubeadm
// bootstrap, kubeadm control plane: the real sigs.k8s.io/cluster-api
// controllers and webhooks, built by make from the pinned module) as a
// supervised child process against an apiserver.
//
// Cluster API's runtime client and its controllers are internal packages, so
// the dev environment and the tests that need the real peers run the
// released binaries instead of linking them:
//
//	p, err := capimanager.Start(ctx, capimanager.Options{Manager: capimanager.KubeadmControlPlane, Config: cfg})
//	...
//	defer p.Stop()
//
// Start installs the manager's admission webhooks and turns its CRDs'
// conversion over to the process, so clients of every served version work
// as they would in a real management cluster. Stop undoes both. Each process
// runs in a process group of its own and, on Linux, dies with its parent
// (parent-death signal). With Options.Restarts, a process that dies after
// it was ready is started again.
package capimanager
