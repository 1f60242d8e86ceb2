// Package kustomize holds the kustomize sources of capi-monolith's clusterctl
// provider repositories: base/ (the manager Deployment and what every bundle
// shares), overlays/ (one per provider type, plus all-in-one),
// components/, the workload cluster templates/ and registration/ (the
// runtime extension's ExtensionConfig, a file of its own in the release). They are embedded in the
// binary; package kustomize/bundle builds them in-process with kustomize/api.
package kustomize

import "embed"

// FS holds base/, overlays/, components/, templates/ and registration/.
//
//go:embed base overlays components templates registration
var FS embed.FS
