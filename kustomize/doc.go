// Package kustomize holds the kustomize sources of capi-monolith's clusterctl
// provider repositories: base/ (the manager Deployment and what every bundle
// shares), overlays/ (one per provider type, plus all-in-one, and their
// Docker variants), components/ and the workload cluster templates/. They
// are embedded in the binary; package kustomize/bundle builds them in-process with kustomize/api.
package kustomize

import "embed"

// FS holds base/, overlays/, components/ and templates/.
//
//go:embed base overlays components templates
var FS embed.FS
