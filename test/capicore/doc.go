// Package capicore runs Cluster API's own core manager (the real
// sigs.k8s.io/cluster-api controllers and webhooks, built by `make capi-core`)
// as a supervised subprocess against an envtest apiserver.
//
// Cluster API's runtime client and several of its controllers are internal
// packages, so tests that need the real core controllers (MachinePool,
// Runtime SDK, end-to-end) run the released binary instead of linking it:
//
//	env, _ := envtest.Start(ctx, envtest.Options{})
//	core, err := capicore.Start(ctx, capicore.Options{Config: env.Config})
//	...
//	defer core.Stop()
//
// Start installs core's admission webhooks and turns Cluster API's CRDs'
// conversion over to the process, so v1beta1 clients work as they would in a
// real management cluster. Stop undoes both.
package capicore
