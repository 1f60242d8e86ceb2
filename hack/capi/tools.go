//go:build tools

// Package capi pins the binaries the project builds from the pinned
// sigs.k8s.io/cluster-api module (see hack/build-capi.sh): Cluster API's own
// core, kubeadm bootstrap and kubeadm control plane managers, which tests and
// `capi-monolith dev` run as the real peers, and clusterctl. They are built
// from this module rather than with `go install ...@version`, which the
// upstream module's replace directives forbid.
package capi

import (
	_ "sigs.k8s.io/cluster-api/bootstrap/kubeadm"
	_ "sigs.k8s.io/cluster-api/cmd/clusterctl"
	_ "sigs.k8s.io/cluster-api/controlplane/kubeadm"
	_ "sigs.k8s.io/cluster-api/core"
)
