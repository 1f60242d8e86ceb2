// Package capicore runs Cluster API's own core manager (the real
// sigs.k8s.io/cluster-api controllers and webhooks, built by `make capi-core`)
// as a supervised subprocess against an envtest apiserver. It is the test
// suites' name for dev/capicore, which `capi-monolith dev` runs too:
//
//	env, _ := envtest.Start(ctx, envtest.Options{})
//	core, err := capicore.Start(ctx, capicore.Options{Config: env.Config})
//	...
//	defer core.Stop()
//
// Start installs core's admission webhooks and turns Cluster API's CRDs'
// conversion over to the process, so v1beta1 clients work as they would in a
// real management cluster. Stop undoes both.
//
// The package's tests also run core beside the binary's own manager and
// check what core makes of our objects' status (mirror_test.go): the
// reason and message a MonolithMachine's or MonolithMachinePool's Ready
// carries onto the Machine or MachinePool, and no panic in core's log.
package capicore
