// Package capie2e runs Cluster API's own end-to-end spec library
// (sigs.k8s.io/cluster-api/test/e2e v1.14.2: QuickStartSpec,
// KCPAndMachineDeploymentRolloutSpec, ClusterUpgradeConformanceSpec, …)
// unchanged against `capi-monolith dev`, as Cluster API's providers run it
// against themselves: it is our conformance suite. It is a Go module of its
// own, pinning sigs.k8s.io/cluster-api and .../api to v1.14.2 with replace
// directives, so that the test module's dependencies never reach the
// binary's. `make test` runs the specs labelled `short`; `make
// test-capi-e2e` runs all of them but the one labelled `bench` (ScaleSpec at
// a size from the environment), which `make bench-capi-scale` runs
// (docs/conformance.md has the table).
//
// What the framework needs and dev lacks comes from our side:
//   - the bootstrap cluster proxy is a `capi-monolith dev` the suite starts
//     (or the one -e2e.kubeconfig names): no kind, no `clusterctl init`;
//     dev runs Cluster API's three managers with the feature gates of
//     Cluster API's own e2e configuration and records every provider in
//     clusterctl's inventory, with clusterctl's labels on every CRD, as
//     `clusterctl init` would;
//   - the clusterctl repository is ours, written by `capi-monolith bundle`
//     at the version dev records (so `clusterctl generate cluster` finds our
//     flavors), with the E2EConfig's variables added by the framework's
//     CopyAndAmendClusterctlConfig;
//   - config/monolith.yaml is the E2EConfig: our variables and Cluster API's
//     own intervals.
//
// What we could not use from the framework, and why:
//   - clusterctl.CreateRepository and the providers' component sources of
//     the E2EConfig: they build components with the kustomize binary or
//     download release assets, and nothing is installed by clusterctl here
//     anyway; the providers listed in config/monolith.yaml (the E2EConfig
//     requires them) point at a placeholder, config/installed-by-dev.yaml.
//   - bootstrap.CreateKindBootstrapClusterAndLoadImages and
//     InitManagementClusterAndWatchControllerLogs: dev is the management
//     cluster; its managers' logs are under <artifacts>/dev/state/logs.
//   - The machine log collector (framework.DockerLogCollector): inMemory
//     machines have no logs to collect.
//
// MachinePoolSpec is behind the library's `e2e` build tag: the suite is
// built with -tags e2e (the Makefile passes it).
package capie2e
