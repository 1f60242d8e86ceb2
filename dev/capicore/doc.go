// Package capicore runs Cluster API's own core manager (the real
// sigs.k8s.io/cluster-api controllers and webhooks, built by `make capi-core`)
// as a supervised child process against an apiserver.
//
// Cluster API's runtime client and several of its controllers are internal
// packages, so the dev environment and the tests that need the real core
// controllers (MachinePool, Runtime SDK, end-to-end) run the released binary
// instead of linking it:
//
//	core, err := capicore.Start(ctx, capicore.Options{Config: cfg})
//	...
//	defer core.Stop()
//
// Start installs core's admission webhooks and turns Cluster API's CRDs'
// conversion over to the process, so v1beta1 clients work as they would in a
// real management cluster. Stop undoes both. With Options.Restarts, a process
// that dies after it was ready is started again.
package capicore
