//go:build tools

// Package capicore pins Cluster API's own core manager (the main package of
// sigs.k8s.io/cluster-api/core) so that tests and `capi-monolith dev` run the
// real peer, built from the Go module proxy (see hack/build-capi-core.sh).
package capicore

import (
	_ "sigs.k8s.io/cluster-api/core"
)
